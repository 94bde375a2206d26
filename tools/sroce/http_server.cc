#include "http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace sroce::telemetry {

namespace {

volatile sig_atomic_t g_stop = 0;

void on_signal(int) { g_stop = 1; }

const char* reason(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    default:
      return "Internal Server Error";
  }
}

bool send_all(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

// Read the request head (up to the blank line), at most 8 KiB, 2 s.
bool read_head(int fd, std::string& head) {
  char buf[1024];
  while (head.size() < 8192 && head.find("\r\n\r\n") == std::string::npos &&
         head.find("\n\n") == std::string::npos) {
    pollfd p{fd, POLLIN, 0};
    int r = poll(&p, 1, 2000);
    if (r <= 0) return false;
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return !head.empty();
    head.append(buf, static_cast<size_t>(n));
  }
  return true;
}

void answer(int fd, const HttpHandler& handler) {
  std::string head;
  HttpResponse resp;
  if (!read_head(fd, head)) return;
  const size_t eol = head.find_first_of("\r\n");
  const std::string line = head.substr(0, eol);
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp1 == std::string::npos) {
    resp = {400, "text/plain; charset=utf-8", "bad request line\n"};
  } else {
    const std::string method = line.substr(0, sp1);
    std::string path = line.substr(sp1 + 1, sp2 == std::string::npos ? sp2 : sp2 - sp1 - 1);
    if (size_t q = path.find('?'); q != std::string::npos) path.resize(q);
    if (method != "GET" && method != "HEAD") {
      resp = {405, "text/plain; charset=utf-8", "only GET\n"};
    } else {
      resp = handler(path);
    }
    if (method == "HEAD") resp.body.clear();
  }
  std::string out = "HTTP/1.1 " + std::to_string(resp.status) + " " + reason(resp.status) +
                    "\r\nContent-Type: " + resp.content_type +
                    "\r\nContent-Length: " + std::to_string(resp.body.size()) +
                    "\r\nConnection: close\r\n\r\n" + resp.body;
  send_all(fd, out);
}

}  // namespace

Result<void> serve_http(const HttpOptions& opt, const HttpHandler& handler,
                        const std::function<void(uint16_t port)>& on_listening) {
  sockaddr_storage ss{};
  socklen_t sl = 0;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&ss);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&ss);
  if (inet_pton(AF_INET, opt.address.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(opt.port);
    sl = sizeof(*v4);
  } else if (inet_pton(AF_INET6, opt.address.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(opt.port);
    sl = sizeof(*v6);
  } else {
    return Error{EINVAL, "listen address '" + opt.address + "' is not an IPv4 or IPv6 address"};
  }
  int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Error{errno, std::string("socket: ") + std::strerror(errno)};
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd, reinterpret_cast<sockaddr*>(&ss), sl) < 0 || listen(fd, 16) < 0) {
    int e = errno;
    close(fd);
    return Error{e, "cannot listen on " + opt.address + ":" + std::to_string(opt.port) + ": " +
                        std::strerror(e)};
  }
  sockaddr_storage bound{};
  socklen_t bl = sizeof(bound);
  getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &bl);
  const uint16_t port =
      ntohs(bound.ss_family == AF_INET ? reinterpret_cast<sockaddr_in*>(&bound)->sin_port
                                       : reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port);

  // No SA_RESTART: a signal interrupts accept() and ends the loop.
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  g_stop = 0;
  if (on_listening) on_listening(port);

  long served = 0;
  while (!g_stop && (opt.max_requests < 0 || served < opt.max_requests)) {
    int c = accept4(fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      int e = errno;
      close(fd);
      return Error{e, std::string("accept: ") + std::strerror(e)};
    }
    answer(c, handler);
    close(c);
    ++served;
  }
  close(fd);
  return {};
}

}  // namespace sroce::telemetry
