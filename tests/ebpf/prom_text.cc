#include "prom_text.h"

#include <cmath>
#include <cstdlib>
#include <set>

namespace sroce::tmtest {

namespace {

bool name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool digit(char c) { return c >= '0' && c <= '9'; }

bool valid_metric_name(const std::string& n) {
  if (n.empty() || !(name_start(n[0]) || n[0] == ':')) return false;
  for (char c : n) {
    if (!(name_start(c) || digit(c) || c == ':')) return false;
  }
  return true;
}

bool valid_label_name(const std::string& n) {
  if (n.empty() || !name_start(n[0])) return false;
  for (char c : n) {
    if (!(name_start(c) || digit(c))) return false;
  }
  return n.rfind("__", 0) != 0;  // reserved for internal use
}

// A float as Prometheus writes it: decimal or exponent form, NaN, +Inf, -Inf.
bool parse_value(const std::string& s, double& out) {
  if (s == "NaN") return out = std::nan(""), true;
  if (s == "+Inf" || s == "Inf") return out = HUGE_VAL, true;
  if (s == "-Inf") return out = -HUGE_VAL, true;
  size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
  size_t digits = 0;
  while (i < s.size() && digit(s[i])) ++i, ++digits;
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && digit(s[i])) ++i, ++digits;
  }
  if (digits == 0) return false;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    size_t ed = 0;
    while (i < s.size() && digit(s[i])) ++i, ++ed;
    if (ed == 0) return false;
  }
  if (i != s.size()) return false;
  out = std::strtod(s.c_str(), nullptr);
  return true;
}

struct Cursor {
  const std::string& s;
  size_t i = 0;
  bool end() const { return i >= s.size(); }
  char peek() const { return end() ? '\0' : s[i]; }
  void skip_blanks() {
    while (!end() && (s[i] == ' ' || s[i] == '\t')) ++i;
  }
  std::string take_while(bool (*pred)(char)) {
    const size_t b = i;
    while (!end() && pred(s[i])) ++i;
    return s.substr(b, i - b);
  }
};

bool name_char(char c) { return name_start(c) || digit(c) || c == ':'; }
bool not_blank(char c) { return c != ' ' && c != '\t'; }

// The family a sample name belongs to, given the TYPEs declared so far.
std::string family_of(const std::string& sample, const std::map<std::string, std::string>& types) {
  auto strip = [&](const char* suffix) -> std::string {
    const std::string suf = suffix;
    if (sample.size() > suf.size() &&
        sample.compare(sample.size() - suf.size(), suf.size(), suf) == 0) {
      return sample.substr(0, sample.size() - suf.size());
    }
    return "";
  };
  for (const char* suf : {"_bucket", "_sum", "_count"}) {
    const std::string base = strip(suf);
    if (base.empty()) continue;
    auto it = types.find(base);
    if (it == types.end()) continue;
    if (it->second == "histogram") return base;
    if (it->second == "summary" && std::string(suf) != "_bucket") return base;
  }
  return sample;
}

Error err(size_t line, const std::string& what) {
  return Error{22, "line " + std::to_string(line) + ": " + what};
}

// Histogram rules per label set: buckets with le, increasing, cumulative,
// ending in +Inf equal to _count; _sum and _count present.
Result<void> check_histogram(const PromFamily& f) {
  struct Series {
    std::vector<std::pair<double, double>> buckets;  // (le, value)
    bool has_sum = false, has_count = false;
    double count = 0;
  };
  std::map<std::map<std::string, std::string>, Series> series;
  for (const PromSample& s : f.samples) {
    auto labels = s.labels;
    if (s.name == f.name + "_bucket") {
      auto le = labels.find("le");
      if (le == labels.end()) return Error{22, f.name + ": a _bucket sample without le"};
      double v;
      if (!parse_value(le->second, v))
        return Error{22, f.name + ": le=\"" + le->second + "\" is not a float"};
      labels.erase(le);
      series[labels].buckets.emplace_back(v, s.value);
    } else if (labels.count("le")) {
      return Error{22, f.name + ": le on a non-bucket sample"};
    } else if (s.name == f.name + "_sum") {
      series[labels].has_sum = true;
    } else if (s.name == f.name + "_count") {
      series[labels].has_count = true;
      series[labels].count = s.value;
    } else {
      return Error{22, f.name + ": sample " + s.name + " in a histogram"};
    }
  }
  for (const auto& [labels, se] : series) {
    if (se.buckets.empty() || !std::isinf(se.buckets.back().first)) {
      return Error{22, f.name + ": no le=\"+Inf\" bucket (or not last)"};
    }
    for (size_t i = 1; i < se.buckets.size(); ++i) {
      if (!(se.buckets[i].first > se.buckets[i - 1].first)) {
        return Error{22, f.name + ": le values not increasing"};
      }
      if (se.buckets[i].second < se.buckets[i - 1].second) {
        return Error{22, f.name + ": bucket counts not cumulative"};
      }
    }
    if (!se.has_sum || !se.has_count) return Error{22, f.name + ": _sum or _count missing"};
    if (se.count != se.buckets.back().second) {
      return Error{22, f.name + ": _count differs from the +Inf bucket"};
    }
  }
  return {};
}

}  // namespace

const PromFamily* PromDoc::family(const std::string& name) const {
  for (const PromFamily& f : families) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

const PromSample* PromDoc::find(const std::string& name,
                                const std::map<std::string, std::string>& labels) const {
  for (const PromFamily& f : families) {
    for (const PromSample& s : f.samples) {
      if (s.name == name && s.labels == labels) return &s;
    }
  }
  return nullptr;
}

std::vector<const PromSample*> PromDoc::all(const std::string& name) const {
  std::vector<const PromSample*> out;
  for (const PromFamily& f : families) {
    for (const PromSample& s : f.samples) {
      if (s.name == name) out.push_back(&s);
    }
  }
  return out;
}

Result<PromDoc> parse_prometheus(const std::string& text) {
  PromDoc doc;
  if (!text.empty() && text.back() != '\n') return err(0, "the last line does not end in \\n");
  std::map<std::string, std::string> types;  // declared TYPEs
  std::set<std::string> closed;              // families we have moved past
  std::set<std::pair<std::string, std::map<std::string, std::string>>> seen;
  PromFamily* cur = nullptr;

  auto enter = [&](const std::string& fam, size_t ln) -> Result<PromFamily*> {
    if (cur && cur->name == fam) return cur;
    if (closed.count(fam)) return err(ln, "family " + fam + " continues after another began");
    if (cur) closed.insert(cur->name);
    doc.families.push_back(PromFamily{});
    doc.families.back().name = fam;
    cur = &doc.families.back();
    return cur;
  };

  size_t ln = 0, pos = 0;
  while (pos < text.size()) {
    const size_t nl = text.find('\n', pos);
    const std::string line = text.substr(pos, nl - pos);
    pos = nl + 1;
    ++ln;
    Cursor c{line};
    c.skip_blanks();
    if (c.end()) continue;
    if (c.peek() == '#') {
      ++c.i;
      c.skip_blanks();
      const std::string kw = c.take_while(not_blank);
      if (kw != "HELP" && kw != "TYPE") continue;  // a plain comment
      c.skip_blanks();
      const std::string name = c.take_while(not_blank);
      if (!valid_metric_name(name)) return err(ln, "bad metric name '" + name + "' in " + kw);
      auto f = enter(name, ln);
      if (!f) return f.error();
      if (kw == "HELP") {
        if (cur->has_help) return err(ln, "second HELP for " + name);
        if (c.peek() == ' ' || c.peek() == '\t') ++c.i;
        std::string help;
        for (; !c.end(); ++c.i) {
          if (c.peek() != '\\') {
            help += c.peek();
            continue;
          }
          ++c.i;
          if (c.peek() == '\\') {
            help += '\\';
          } else if (c.peek() == 'n') {
            help += '\n';
          } else {
            return err(ln, "bad escape in HELP");
          }
        }
        cur->help = help;
        cur->has_help = true;
      } else {
        if (cur->has_type) return err(ln, "second TYPE for " + name);
        if (!cur->samples.empty()) return err(ln, "TYPE for " + name + " after its samples");
        c.skip_blanks();
        const std::string type = c.take_while(not_blank);
        c.skip_blanks();
        if (!c.end()) return err(ln, "junk after TYPE");
        if (type != "counter" && type != "gauge" && type != "histogram" && type != "summary" &&
            type != "untyped") {
          return err(ln, "unknown type '" + type + "'");
        }
        cur->type = type;
        cur->has_type = true;
        types[name] = type;
      }
      continue;
    }

    PromSample s;
    s.name = c.take_while(name_char);
    if (!valid_metric_name(s.name)) return err(ln, "bad metric name");
    if (c.peek() == '{') {
      ++c.i;
      for (;;) {
        c.skip_blanks();
        if (c.peek() == '}') {
          ++c.i;
          break;
        }
        const std::string lname = c.take_while(name_char);
        if (!valid_label_name(lname)) return err(ln, "bad label name '" + lname + "'");
        c.skip_blanks();
        if (c.peek() != '=') return err(ln, "expected = after label " + lname);
        ++c.i;
        c.skip_blanks();
        if (c.peek() != '"') return err(ln, "label value not quoted");
        ++c.i;
        std::string v;
        for (;;) {
          if (c.end()) return err(ln, "unterminated label value");
          const char ch = c.s[c.i++];
          if (ch == '"') break;
          if (ch == '\n') return err(ln, "raw newline in label value");
          if (ch != '\\') {
            v += ch;
            continue;
          }
          const char e = c.peek();
          ++c.i;
          if (e == '\\') {
            v += '\\';
          } else if (e == '"') {
            v += '"';
          } else if (e == 'n') {
            v += '\n';
          } else {
            return err(ln, "bad escape in label value");
          }
        }
        if (!s.labels.emplace(lname, v).second) return err(ln, "label " + lname + " twice");
        c.skip_blanks();
        if (c.peek() == ',') {
          ++c.i;
        } else if (c.peek() != '}') {
          return err(ln, "expected , or } in labels");
        }
      }
    }
    if (c.peek() != ' ' && c.peek() != '\t') return err(ln, "expected a blank before the value");
    c.skip_blanks();
    const std::string vs = c.take_while(not_blank);
    if (!parse_value(vs, s.value)) return err(ln, "bad value '" + vs + "'");
    c.skip_blanks();
    if (!c.end()) {
      const std::string ts = c.take_while(not_blank);
      char* e = nullptr;
      std::strtoll(ts.c_str(), &e, 10);
      if (ts.empty() || *e) return err(ln, "bad timestamp '" + ts + "'");
      c.skip_blanks();
      if (!c.end()) return err(ln, "junk after the timestamp");
    }
    const std::string fam = family_of(s.name, types);
    auto f = enter(fam, ln);
    if (!f) return f.error();
    if (!seen.emplace(s.name, s.labels).second) return err(ln, "duplicate series " + s.name);
    if (cur->type == "counter" && (std::isnan(s.value) || s.value < 0)) {
      return err(ln, "negative or NaN counter " + s.name);
    }
    cur->samples.push_back(std::move(s));
  }
  for (const PromFamily& f : doc.families) {
    if (f.type == "histogram") {
      if (auto r = check_histogram(f); !r) return r.error();
    }
  }
  return doc;
}

std::vector<std::string> prometheus_convention_problems(const PromDoc& d) {
  std::vector<std::string> p;
  for (const PromFamily& f : d.families) {
    if (!f.has_help) p.push_back(f.name + ": no HELP");
    if (!f.has_type) p.push_back(f.name + ": no TYPE");
    const bool total = f.name.size() > 6 && f.name.compare(f.name.size() - 6, 6, "_total") == 0;
    if (f.type == "counter" && !total) p.push_back(f.name + ": counter without _total");
    if (f.type != "counter" && total) p.push_back(f.name + ": _total on a " + f.type);
  }
  return p;
}

}  // namespace sroce::tmtest
