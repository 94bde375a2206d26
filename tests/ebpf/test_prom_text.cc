// The strict Prometheus text parser must itself be able to say no, or the
// exporter test proves nothing.
#include <catch2/catch.hpp>

#include "prom_text.h"

using sroce::tmtest::parse_prometheus;
using sroce::tmtest::prometheus_convention_problems;

TEST_CASE("prom parser: accepts the format's own example") {
  const std::string ok =
      "# HELP http_requests_total The total number of HTTP requests.\n"
      "# TYPE http_requests_total counter\n"
      "http_requests_total{method=\"post\",code=\"200\"} 1027 1395066363000\n"
      "http_requests_total{method=\"post\",code=\"400\"}    3 1395066363000\n"
      "\n"
      "# Escaping in label values:\n"
      "msdos_file_access_time_seconds{path=\"C:\\\\DIR\\\\FILE.TXT\",error=\"Cannot find "
      "file:\\n\\\"FILE.TXT\\\"\"} 1.458255915e9\n"
      "metric_without_timestamp_and_labels 12.47\n"
      "# HELP api_http_request_latency_seconds A histogram.\n"
      "# TYPE api_http_request_latency_seconds histogram\n"
      "api_http_request_latency_seconds_bucket{le=\"0.05\"} 24054\n"
      "api_http_request_latency_seconds_bucket{le=\"0.1\"} 33444\n"
      "api_http_request_latency_seconds_bucket{le=\"+Inf\"} 144320\n"
      "api_http_request_latency_seconds_sum 53423\n"
      "api_http_request_latency_seconds_count 144320\n"
      "something_weird{problem=\"division by zero\"} +Inf -3982045\n";
  auto d = parse_prometheus(ok);
  REQUIRE(d.ok());
  CHECK(d->families.size() == 5);
  const auto* s =
      d->find("msdos_file_access_time_seconds",
              {{"path", "C:\\DIR\\FILE.TXT"}, {"error", "Cannot find file:\n\"FILE.TXT\""}});
  REQUIRE(s);
  CHECK(s->value == 1.458255915e9);
  CHECK(d->find("http_requests_total", {{"method", "post"}, {"code", "400"}})->value == 3);
  CHECK(d->family("api_http_request_latency_seconds")->samples.size() == 5);
}

TEST_CASE("prom parser: refuses what the format does not allow") {
  const char* bad[] = {
      "1abc 1\n",                                         // metric name starts with a digit
      "a-b 1\n",                                          // '-' in a metric name
      "m{1l=\"x\"} 1\n",                                  // label name starts with a digit
      "m{__l=\"x\"} 1\n",                                 // reserved label name
      "m{l=x} 1\n",                                       // unquoted label value
      "m{l=\"a\\tb\"} 1\n",                               // unknown escape
      "m{l=\"a\",l=\"b\"} 1\n",                           // label twice
      "m{l=\"a\"}1\n",                                    // no blank before the value
      "m 1.2.3\n",                                        // bad value
      "m 1 12x\n",                                        // bad timestamp
      "m 1",                                              // no final newline
      "m 1\nm 2\n",                                       // duplicate series
      "m 1\n# TYPE m counter\n",                          // TYPE after samples
      "# TYPE m counter\n# TYPE m counter\nm_total 1\n",  // second TYPE
      "# TYPE m wobble\n",                                // unknown type
      "# TYPE m counter\nm -1\n",                         // negative counter
      "a 1\nb 1\na{x=\"1\"} 1\n",                         // family a split in two
      "# HELP m a \\t b\nm 1\n",                          // bad escape in HELP
      "# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_sum 1\nh_count 1\n",  // no +Inf
      "# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n",
      "# TYPE h histogram\nh_bucket{le=\"2\"} 1\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 1\n"
      "h_sum 1\nh_count 1\n",                                               // le not increasing
      "# TYPE h histogram\nh_bucket{le=\"+Inf\"} 2\nh_sum 1\nh_count 1\n",  // count mismatch
      "# TYPE h histogram\nh_bucket{le=\"+Inf\"} 1\nh_count 1\n",           // no _sum
      "# TYPE h histogram\nh_bucket 1\n",                                   // bucket without le
  };
  for (const char* text : bad) {
    INFO(text);
    CHECK_FALSE(parse_prometheus(text).ok());
  }
}

TEST_CASE("prom parser: naming conventions are checked apart from the grammar") {
  auto d = parse_prometheus("# HELP a_total x\n# TYPE a_total gauge\na_total 1\nb 2\n");
  REQUIRE(d.ok());
  const auto p = prometheus_convention_problems(*d);
  CHECK(p.size() == 3);  // _total on a gauge; b has neither HELP nor TYPE
}
