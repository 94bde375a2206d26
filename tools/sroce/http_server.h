// A tiny blocking HTTP/1.0-style server for the exporter: one request per
// connection, GET only, answered and closed. Enough for a Prometheus scraper
// or curl; not a general web server.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "sroce/engine/result.h"

namespace sroce::telemetry {

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

struct HttpOptions {
  std::string address = "127.0.0.1";  // loopback unless told otherwise
  uint16_t port = 9717;               // 0: any free port (told through on_listening)
  long max_requests = -1;             // stop after this many requests (tests); -1: never
};

using HttpHandler = std::function<HttpResponse(const std::string& path)>;

// Serve until SIGINT/SIGTERM or max_requests. on_listening gets the bound port.
Result<void> serve_http(const HttpOptions& opt, const HttpHandler& handler,
                        const std::function<void(uint16_t port)>& on_listening);

}  // namespace sroce::telemetry
