// safetensors reader: every header field checked before use, each bad case refused with one line naming the
// file and the tensor (or the reason), dtype conversions exact.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "checkpoint/weights_safetensors.hpp"

using namespace attnmap;

namespace {

// An 8-byte little-endian length, `header`, then `data`; `len` overrides the stored header length.
std::vector<uint8_t> file(const std::string& header, const std::vector<uint8_t>& data, int64_t len = -1) {
  std::vector<uint8_t> out(8);
  uint64_t n = len < 0 ? header.size() : static_cast<uint64_t>(len);
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<uint8_t>(n >> (8 * i));
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

std::vector<uint8_t> f32(std::initializer_list<float> v) {
  std::vector<uint8_t> out;
  for (float x : v) {
    uint32_t b = 0;
    std::memcpy(&b, &x, 4);
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(b >> (8 * i)));
  }
  return out;
}

std::string error_of(const std::vector<uint8_t>& bytes) {
  try {
    parse_weights_safetensors(bytes.data(), bytes.size(), "m.safetensors");
  } catch (const Error& e) {
    const std::string s = e.what();
    EXPECT_EQ(s.find('\n'), std::string::npos) << "one line: " << s;
    EXPECT_EQ(s.rfind("m.safetensors: ", 0), 0u) << "names the file: " << s;
    return s;
  }
  return "accepted";
}

const std::vector<uint8_t> k8 = f32({1, 2});  // 8 bytes: two F32 values

}  // namespace

TEST(Safetensors, ReadsF32F16Bf16IgnoresMetadataAcceptsPadding) {
  // F16: 1.0 = 0x3c00, -2.0 = 0xc000, smallest subnormal 0x0001 = 2^-24, 65504 = 0x7bff.
  // BF16: 1.0 = 0x3f80, -0.5 = 0xbf00, 3.140625 = 0x4049.
  std::vector<uint8_t> data = f32({1.5f, -3.25f});
  for (int h : {0x3c00, 0xc000, 0x0001, 0x7bff}) data.push_back(static_cast<uint8_t>(h)), data.push_back(static_cast<uint8_t>(h >> 8));
  for (int h : {0x3f80, 0xbf00, 0x4049}) data.push_back(static_cast<uint8_t>(h)), data.push_back(static_cast<uint8_t>(h >> 8));
  const std::string header =
      R"({"__metadata__":{"format":"pt"},"b":{"dtype":"BF16","shape":[3],"data_offsets":[16,22]},)"
      R"("a":{"dtype":"F32","shape":[1,2],"data_offsets":[0,8]},"h":{"dtype":"F16","shape":[2,2],"data_offsets":[8,16]},)"
      R"("z":{"dtype":"F32","shape":[0,4],"data_offsets":[22,22]}}      )";  // trailing spaces: header padding
  const auto bytes = file(header, data);
  const RawWeights raw = parse_weights_safetensors(bytes.data(), bytes.size(), "m.safetensors");
  ASSERT_EQ(raw.tensors.size(), 4u);
  EXPECT_EQ(raw.tensors.at("a").shape, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(raw.tensors.at("a").data, (std::vector<float>{1.5f, -3.25f}));
  EXPECT_EQ(raw.tensors.at("h").shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(raw.tensors.at("h").data, (std::vector<float>{1.0f, -2.0f, 5.9604644775390625e-8f, 65504.0f}));
  EXPECT_EQ(raw.tensors.at("b").data, (std::vector<float>{1.0f, -0.5f, 3.140625f}));
  EXPECT_TRUE(raw.tensors.at("z").data.empty());
  EXPECT_TRUE(raw.config.empty());
}

TEST(Safetensors, IntegerBuffersAreSkippedWithANotice) {
  const auto bytes = file(R"({"ids":{"dtype":"I64","shape":[1],"data_offsets":[0,8]},"w":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
                          {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 128, 63, 0, 0, 0, 64});
  const RawWeights raw = parse_weights_safetensors(bytes.data(), bytes.size(), "m.safetensors");
  EXPECT_EQ(raw.tensors.count("ids"), 0u);
  EXPECT_EQ(raw.tensors.at("w").data, (std::vector<float>{1, 2}));
  ASSERT_EQ(raw.notices.size(), 1u);
  EXPECT_NE(raw.notices[0].find("ids (I64)"), std::string::npos);
  EXPECT_EQ(raw.skipped.at("ids"), "I64");  // so a model that needs it names the dtype, not "missing"
}

// tools/export_weights.py stores the attnmap config as a JSON string in __metadata__["config"] (safetensors
// metadata is a string-to-string map); it is read like the JSON weights' "config" object.
TEST(Safetensors, MetadataConfigIsReadAndCheckedOthersIgnored) {
  const std::string t = R"("w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  auto bytes = file(R"({"__metadata__":{"format":"pt","config":"{\"num_heads\": 4, \"labels\": [\"a\", \"b\"]}"},)" + t + "}", k8);
  RawWeights raw = parse_weights_safetensors(bytes.data(), bytes.size(), "m.safetensors");
  EXPECT_EQ(raw.config.at("num_heads").get<int>(), 4);
  EXPECT_EQ(raw.config.at("labels").size(), 2u);
  EXPECT_EQ(raw.config_where, "__metadata__ config");
  bytes = file(R"({"__metadata__":{"format":"pt"},)" + t + "}", k8);
  raw = parse_weights_safetensors(bytes.data(), bytes.size(), "m.safetensors");
  EXPECT_TRUE(raw.config.empty());
  EXPECT_NE(error_of(file(R"({"__metadata__":{"config":"{\"num_heads\": "},)" + t + "}", k8))
                .find("__metadata__ \"config\" is not valid JSON"),
            std::string::npos);
  EXPECT_NE(error_of(file(R"({"__metadata__":{"config":"[1, 2]"},)" + t + "}", k8)).find("must hold a JSON object, found [1,2]"),
            std::string::npos);
  EXPECT_NE(error_of(file(R"({"__metadata__":{"config":{"num_heads":4}},)" + t + "}", k8)).find("must be a string"),
            std::string::npos);
  EXPECT_NE(error_of(file(R"({"__metadata__":[1],)" + t + "}", k8)).find("__metadata__ is not a JSON object"), std::string::npos);
}

TEST(Safetensors, RefusesBadHeaders) {
  auto has = [](const std::string& msg, const std::string& want) {
    return msg.find(want) != std::string::npos ? ::testing::AssertionSuccess()
                                               : ::testing::AssertionFailure() << "'" << want << "' not in: " << msg;
  };
  const std::string a = R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  EXPECT_TRUE(has(error_of({1, 2, 3}), "3 bytes, shorter than the 8-byte header length"));
  EXPECT_TRUE(has(error_of(file("{" + a + "}", k8, 1000)), "header length 1000 does not fit in the file"));
  EXPECT_TRUE(has(error_of(file("{" + a + "}", k8, int64_t{1} << 62)), "does not fit in the file"));
  EXPECT_TRUE(has(error_of(file("[1, 2]", k8)), "header does not start with '{'"));
  EXPECT_TRUE(has(error_of(file("{\"a\":", k8)), "header is not valid JSON"));
  EXPECT_TRUE(has(error_of(file("{" + a + "," + a + "}", k8)), "tensor 'a' appears twice"));
  EXPECT_TRUE(has(error_of(file(R"({"a":[1]})", k8)), "tensor 'a' header entry is not an object"));
  EXPECT_TRUE(has(error_of(file(R"({"a":{"shape":[2],"data_offsets":[0,8]}})", k8)), "tensor 'a' has no \"dtype\""));
  EXPECT_TRUE(has(error_of(file(R"({"a":{"dtype":"F32","data_offsets":[0,8]}})", k8)), "tensor 'a' has no \"shape\""));
  EXPECT_TRUE(has(error_of(file(R"({"a":{"dtype":"F32","shape":[2]}})", k8)), "tensor 'a' has no \"data_offsets\""));
  EXPECT_TRUE(has(error_of(file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,-8]}})", k8)), "tensor 'a' has no \"data_offsets\""));
  EXPECT_TRUE(has(error_of(file(R"({"a":{"dtype":"Q4","shape":[2],"data_offsets":[0,8]}})", k8)), "tensor 'a' has unknown dtype 'Q4'"));
  EXPECT_TRUE(has(error_of(file(R"({"a":{"dtype":"F32","shape":[2,-1],"data_offsets":[0,8]}})", k8)),
                  "tensor 'a' has a shape entry that is not a non-negative integer"));
  EXPECT_TRUE(has(error_of(file(R"({"a":{"dtype":"F32","shape":[1.5],"data_offsets":[0,8]}})", k8)),
                  "tensor 'a' has a shape entry"));
  EXPECT_TRUE(has(error_of(file(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", k8)),
                  "tensor 'a' has 8 bytes, expected (3,) x F32 = 12"));
  EXPECT_TRUE(has(error_of(file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,16]}})", k8)),
                  "tensor 'a' has data_offsets [0, 16] outside the data area of 8 bytes"));
  EXPECT_TRUE(has(error_of(file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", k8)), "tensor 'a' has data_offsets [8, 0]"));
  // 2^40 * 2^40 elements overflow size_t: refused before any allocation.
  EXPECT_TRUE(has(error_of(file(R"({"a":{"dtype":"F32","shape":[1099511627776,1099511627776],"data_offsets":[0,8]}})", k8)),
                  "tensor 'a': size overflow"));
  // Overlap, gap, trailing bytes.
  EXPECT_TRUE(has(error_of(file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", k8)),
                  "tensor 'b' starts at byte 4 of the data area, expected 8 (overlaps the previous tensor)"));
  EXPECT_TRUE(has(error_of(file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", k8)),
                  "tensor 'a' starts at byte 4 of the data area, expected 0 (gap after the previous tensor)"));
  std::vector<uint8_t> longer = k8;
  longer.push_back(0);
  EXPECT_TRUE(has(error_of(file("{" + a + "}", longer)), "1 trailing bytes after the last tensor"));
  // Non-finite values, by tensor name, in every float dtype.
  EXPECT_TRUE(has(error_of(file("{" + a + "}", f32({1, std::numeric_limits<float>::infinity()}))),
                  "tensor 'a' holds a non-finite value"));
  EXPECT_TRUE(has(error_of(file(R"({"h":{"dtype":"F16","shape":[1],"data_offsets":[0,2]}})", {0x00, 0x7e})),
                  "tensor 'h' holds a non-finite value (nan) at element 0"));
  EXPECT_TRUE(has(error_of(file(R"({"b":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]}})", {0x80, 0x3f, 0x80, 0xff})),
                  "tensor 'b' holds a non-finite value (-inf) at element 1"));
}

TEST(Safetensors, LoadFileMapsAndNamesAMissingFile) {
  try {
    load_weights_safetensors("/nonexistent/m.safetensors");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/m.safetensors: cannot open"), std::string::npos);
  }
}

// Issue 20: a safetensors F32 tensor is used in place from the memory that holds the file (its mapping, when
// load_weights_safetensors reads a file): a view, no copy, which keeps that memory alive. Tensors that cannot
// be viewed - F16, or an F32 one that is not 4-byte aligned after an odd-sized F16 one - are converted.
TEST(Safetensors, F32TensorsAreViewsThatKeepTheFileMemoryAlive) {
  std::vector<uint8_t> data = f32({1.5f, -3.25f});                               // a: F32 [0, 8)
  for (int h : {0x3c00, 0xc000, 0x0001}) data.push_back(static_cast<uint8_t>(h)), data.push_back(static_cast<uint8_t>(h >> 8));
  const std::vector<uint8_t> c = f32({7.0f, 8.0f});                               // h: F16 [8, 14), c: F32 [14, 22)
  data.insert(data.end(), c.begin(), c.end());
  std::string header = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"h":{"dtype":"F16","shape":[3],"data_offsets":[8,14]},)"
                       R"("c":{"dtype":"F32","shape":[2],"data_offsets":[14,22]}})";
  while ((8 + header.size()) % 8) header += ' ';  // the data area 8-aligned, as safetensors writes it
  auto bytes = std::make_shared<std::vector<uint8_t>>(file(header, data));
  const uint8_t* base = bytes->data() + 8 + header.size();
  std::weak_ptr<std::vector<uint8_t>> alive = bytes;
  RawWeights raw = parse_weights_safetensors(bytes->data(), bytes->size(), "m.safetensors", bytes);
  bytes.reset();  // only the views hold the memory now
  ASSERT_FALSE(alive.expired());
  const Tensor& a = raw.tensors.at("a");
  EXPECT_TRUE(a.data.is_view());
  EXPECT_EQ(static_cast<const void*>(a.data.data()), static_cast<const void*>(base));  // the file's own bytes
  EXPECT_EQ(a.data, (std::vector<float>{1.5f, -3.25f}));
  EXPECT_FALSE(raw.tensors.at("h").data.is_view());
  EXPECT_EQ(raw.tensors.at("h").data, (std::vector<float>{1.0f, -2.0f, 5.9604644775390625e-8f}));
  EXPECT_FALSE(raw.tensors.at("c").data.is_view());  // byte 14 of an 8-aligned area: not float-aligned
  EXPECT_EQ(raw.tensors.at("c").data, (std::vector<float>{7.0f, 8.0f}));
  Floats copy = a.data;  // a copy of a view shares the memory; writing to it makes its own values
  copy.mutable_data()[0] = 9.0f;
  EXPECT_FALSE(copy.is_view());
  EXPECT_EQ(a.data[0], 1.5f);
  raw = RawWeights();
  EXPECT_TRUE(alive.expired());  // released with the last view
  // Without an owner every tensor is copied, as before.
  const auto plain = file(header, data);
  EXPECT_FALSE(parse_weights_safetensors(plain.data(), plain.size(), "m.safetensors").tensors.at("a").data.is_view());
}

TEST(Safetensors, InPlaceF32IsStillCheckedFinite) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::string header = R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,12]}})";
  while ((8 + header.size()) % 8) header += ' ';
  auto bytes = std::make_shared<std::vector<uint8_t>>(file(header, f32({1.0f, nan, 2.0f})));
  try {
    parse_weights_safetensors(bytes->data(), bytes->size(), "m.safetensors", bytes);
    FAIL() << "accepted a NaN";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "m.safetensors: tensor 'w' holds a non-finite value (nan) at element 1");
  }
}
