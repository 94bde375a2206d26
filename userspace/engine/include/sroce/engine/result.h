// Control-path results: a value or an error that carries the errno a
// libibverbs user expects plus a sentence that says what was wrong and what was
// expected. (std::expected is C++23; this is the small part of it we need.)
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace sroce {

struct Error {
  int code = 0;         // positive errno value (EINVAL, ENOMEM, EBUSY, ...)
  std::string message;  // "modify_qp: RTR needs IBV_QP_PATH_MTU; got mask 0x81"
};

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Result(Error e) : v_(std::move(e)) {}      // NOLINT(google-explicit-constructor)

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() { return std::get<0>(v_); }
  const T& value() const { return std::get<0>(v_); }
  T& operator*() { return value(); }
  const T& operator*() const { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  const Error& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error e) : err_(std::move(e)), ok_(false) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const { return err_; }

 private:
  Error err_;
  bool ok_ = true;
};

}  // namespace sroce
