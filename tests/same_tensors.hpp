// same_tensors.hpp - two parses of one weights file hold the same tensors, bit for bit (the JSON fast paths
// against the SAX parser: tests/test_batch.cpp, tests/test_json_numbers.cpp).
#pragma once
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "checkpoint/weights.hpp"

/// The same tensor names, shapes and float bits (the sign of zero included) in a and b; `what` names the
/// parse in failures. Fatal assertions return from this function only.
inline void expect_same_tensors(const attnmap::RawWeights& a, const attnmap::RawWeights& b, const std::string& what) {
  ASSERT_EQ(a.tensors.size(), b.tensors.size()) << what;
  for (const auto& [name, t] : a.tensors) {
    ASSERT_TRUE(b.tensors.count(name)) << what << ": " << name;
    const attnmap::Tensor& u = b.tensors.at(name);
    EXPECT_EQ(t.shape, u.shape) << what << ": " << name;
    ASSERT_EQ(t.data.size(), u.data.size()) << what << ": " << name;
    for (size_t i = 0; i < t.data.size(); ++i) {  // (a loop: memcmp on an empty vector's null data() is undefined)
      uint32_t x = 0, y = 0;
      std::memcpy(&x, &t.data[i], 4);
      std::memcpy(&y, &u.data[i], 4);
      ASSERT_EQ(x, y) << what << ": " << name << "[" << i << "]";
    }
  }
}
