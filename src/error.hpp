// error.hpp - the one error type attnmap throws.
#pragma once
#include <stdexcept>
#include <string>

namespace attnmap {

/// The project's single error type. Its message names the file, the tensor or pixel size, and what was
/// expected against what was found. Thrown by every stage; caught per image in the batch loop and once
/// in main.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace attnmap
