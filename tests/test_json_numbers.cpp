// The JSON weights scanner's short-number path (checkpoint/json_number.hpp, 8 bytes at a time) against the
// general code and the reference SAX parser (nlohmann/json + strtod): the same float32 bits for every number
// form - leading zeros, 7 / 8 / 9+ digits, signs, exponents, blanks between numbers, numbers at the end of
// the buffer - and refused text refused the same way.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "checkpoint/json_number.hpp"
#include "checkpoint/weights.hpp"
#include "checkpoint/weights_json.hpp"
#include "core/error.hpp"
#include "io/hash.hpp"
#include "io/mapped_file.hpp"
#include "same_tensors.hpp"
#include "test_util.hpp"

using namespace attnmap;

namespace {

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// What the SAX parser stores for a number as written: strtod's double rounded to float, except that an
// integer (no '.', no exponent) is nlohmann's int64, so "-0" is +0.
float expected(const std::string& s) {
  const double d = std::strtod(s.c_str(), nullptr);
  const bool integer = s.find_first_of(".eE") == std::string::npos;
  return integer && d == 0.0 ? 0.0f : static_cast<float>(d);
}

// Number forms that reach every branch of both paths.
std::vector<std::string> tricky_numbers() {
  std::vector<std::string> v = {
      "0", "-0", "0.0", "-0.0", "0.5", "-0.5", "7", "-7", "10", "100.001", "0.0000001", "-0.0000001",
      "0.00000001", "0.000000012345", "0.1234567", "0.12345678", "0.123456789", "1234567", "-1234567", "12345678",
      "-12345678", "123456789", "1234567.1234567", "-9999999.9999999", "9999999.99999999", "12345678.5",
      "1.0000000", "1.00000000", "0.3", "0.1", "0.2", "0.7", "3.4028234e38", "-3.4028234e38", "1.4e-45",
      "1e5", "1E5", "1.5e-3", "-2.5E+2", "1e0", "0e0", "-0e0", "0.0e5", "123456789012345", "1234567890123456",
      "0.1234567890123456789", "12345678901234567890e-20", "7e-30", "1.17549435e-38", "9.999999e-8",
      "5.5", "0.0001220703125", "16777217", "16777216.5", "0.30000001192092896", "2.7182818", "-3.1415927"};
  std::mt19937 rng(30);
  for (int i = 0; i < 3000; ++i) {  // random digit counts: 0..10 integer digits, 0..10 fraction digits
    const int int_digits = static_cast<int>(rng() % 11), frac_digits = static_cast<int>(rng() % 11);
    std::string s = rng() % 2 ? "-" : "";
    if (int_digits == 0) {
      s += '0';
    } else {
      s += static_cast<char>('1' + rng() % 9);
      for (int k = 1; k < int_digits; ++k) s += static_cast<char>('0' + rng() % 10);
    }
    if (frac_digits > 0) {
      s += '.';
      const int zeros = rng() % 3 == 0 ? static_cast<int>(rng() % static_cast<unsigned>(frac_digits + 1)) : 0;
      for (int k = 0; k < frac_digits; ++k) s += k < zeros ? '0' : static_cast<char>('0' + rng() % 10);
    }
    if (rng() % 8 == 0) s += (rng() % 2 ? "e-" : "E") + std::to_string(rng() % 12);
    v.push_back(s);
  }
  return v;
}

}  // namespace

// The helpers on their own: the digit run and its value for every run length and what follows it.
TEST(JsonNumbers, DigitRunsAndTheirValues) {
  if (!json_number::kEnabled) GTEST_SKIP() << "not a little-endian build";
  const std::string after("\x00 ,]e.-/:\x7f\x80\xff", 12);
  for (int n = 0; n <= 8; ++n) {
    for (const char c : after) {
      std::string s;
      for (int k = 0; k < n; ++k) s += static_cast<char>('0' + (k * 7 + n) % 10);
      std::string padded = s + std::string(8, c);
      const uint64_t x = json_number::load8(padded.data());
      ASSERT_EQ(json_number::digit_run(x), n) << s << " then byte " << int(static_cast<unsigned char>(c));
      if (n > 0) {
        EXPECT_EQ(json_number::digits_value(x, n), std::stoull(s)) << s;
      }
    }
  }
  EXPECT_EQ(json_number::digits_value(json_number::load8("00000012"), 8), 12u);
  EXPECT_EQ(json_number::digits_value(json_number::load8("99999999"), 8), 99999999u);
  EXPECT_EQ(json_number::digits_value(json_number::load8("0007,xyz"), 4), 7u);
}

// plain_decimal against strtod for each form: taken for the plain short forms, the same bits; nothing read or
// stored for the others (the general code decides them), nor within json_number::kMargin bytes of the end.
TEST(JsonNumbers, ShortPathMatchesStrtodAndDeclinesTheRest) {
  if (!json_number::kEnabled) GTEST_SKIP() << "not a little-endian build";
  int taken = 0;
  for (const std::string& s : tricky_numbers()) {
    for (const char* tail : {",", "]", " ", "\n", "}"}) {
      const std::string text = s + std::string(tail) + std::string(40, ' ');
      float f = 12345.0f;
      const char* end = json_number::plain_decimal(text.data(), text.data() + text.size(), &f);
      const size_t dot = s.find('.');
      const size_t int_digits = (dot == std::string::npos ? s.size() : dot) - (s[0] == '-' ? 1 : 0);
      const size_t frac_digits = dot == std::string::npos ? 0 : s.size() - dot - 1;
      const bool plain = s.find_first_of("eE") == std::string::npos && int_digits <= 7 && frac_digits <= 7;
      ASSERT_EQ(end != nullptr, plain) << s;
      if (!end) {
        EXPECT_EQ(f, 12345.0f) << s;
        continue;
      }
      ++taken;
      EXPECT_EQ(end, text.data() + s.size()) << s;
      ASSERT_EQ(bits(f), bits(expected(s))) << s << " read as " << f;
    }
    // Too near the end: declined without reading.
    const std::string near_end = s + "]}";
    float f = 0;
    if (static_cast<long>(near_end.size()) < json_number::kMargin) {
      EXPECT_EQ(json_number::plain_decimal(near_end.data(), near_end.data() + near_end.size(), &f), nullptr) << s;
    }
  }
  EXPECT_GT(taken, 3000);
}

// Whole files: the scanner (short path, tight array loop, general code near the end) against the SAX parser
// and strtod, with several blank styles between the numbers, as one row and as rows of a matrix.
TEST(JsonNumbers, ScannerMatchesSaxParserBitForBit) {
  const std::vector<std::string> nums = tricky_numbers();
  const std::vector<std::string> seps = {",", ", ", ",\n  ", " ,", "\t,\t", ",\r\n"};
  for (size_t style = 0; style < seps.size(); ++style) {
    std::string row = "[", matrix = "[";
    const size_t cols = 10, rows = nums.size() / cols;
    for (size_t i = 0; i < nums.size(); ++i) row += (i ? seps[style] : "") + nums[i];
    row += "]";
    for (size_t r = 0; r < rows; ++r) {
      matrix += r ? ",\n[" : "[";
      for (size_t c = 0; c < cols; ++c) matrix += (c ? seps[(style + c) % seps.size()] : "") + nums[r * cols + c];
      matrix += "]";
    }
    matrix += "]";
    // The row last, so that its final numbers are within the short path's margin of the end.
    const std::string text = "{\"config\": {}, \"m\": " + matrix + ", \"r\": " + row + "}";
    const std::string what = "separator style " + std::to_string(style);
    const RawWeights fast = parse_weights_json(text, "t.json"), sax = parse_weights_json_sax(text, "t.json");
    expect_same_tensors(fast, sax, what);
    const Tensor& r = fast.tensors.at("r");
    ASSERT_EQ(r.shape, (std::vector<int64_t>{static_cast<int64_t>(nums.size())}));
    for (size_t i = 0; i < nums.size(); ++i) ASSERT_EQ(bits(r.data[i]), bits(expected(nums[i]))) << nums[i];
    EXPECT_EQ(fast.tensors.at("m").shape, (std::vector<int64_t>{static_cast<int64_t>(rows), static_cast<int64_t>(cols)}));
  }
  // Short files: every number within the margin of the end.
  for (const char* s : {"{\"a\": [1.5, -0.25, 0.0000001]}", "{\"a\":[[0.1],[-0]]}", "{\"a\": [7,8,9.75]}"}) {
    expect_same_tensors(parse_weights_json(s, "t.json"), parse_weights_json_sax(s, "t.json"), s);
  }
}

// A mapped file whose last bytes are numbers, sized to end exactly at a page boundary (a read past the end
// would fault), read as load_weights_json reads it (the hash on its second thread meanwhile).
class JsonNumbersFile : public TempDirTest {};
TEST_F(JsonNumbersFile, MappedFileEndingInNumbers) {
  std::string text = "{\"a\": [";
  for (int i = 0; text.size() < 4096 - 40; ++i) text += (i ? "," : "") + std::to_string(i % 997) + ".125";
  text += "], \"b\": [0.5";
  while (text.size() < 4096 - 2) text += 4096 - 2 - text.size() == 3 ? ",10" : ",1";
  text += "]}";
  ASSERT_EQ(text.size(), 4096u);
  const std::string path = (dir / "w.json").string();
  std::ofstream(path, std::ios::binary) << text;
  const RawWeights loaded = load_weights_json(path);
  expect_same_tensors(loaded, parse_weights_json_sax(text, path), "mapped");
  EXPECT_EQ(loaded.files.at(0).sha256, sha256_text(text));
}

// Malformed numbers are still refused with the SAX parser's words, wherever they stand in a row.
TEST(JsonNumbers, MalformedNumbersKeepTheirMessages) {
  const std::string pad = std::string(200, ' ');
  for (const char* bad : {"01", "1.", "-", "1.2.3", "1e", "--1", "1.5x", ".5", "0x10", "1,,2", "1e999", "1e-999"}) {
    for (const std::string& text : {"{\"a\": [0.5, " + std::string(bad) + ", 0.25]" + pad + "}",
                                    "{\"a\": [0.5, " + std::string(bad) + "]}"}) {
      std::string fast_msg, sax_msg;
      try {
        parse_weights_json(text, "t.json");
      } catch (const Error& e) {
        fast_msg = e.what();
      }
      try {
        parse_weights_json_sax(text, "t.json");
      } catch (const Error& e) {
        sax_msg = e.what();
      }
      EXPECT_FALSE(sax_msg.empty()) << bad;
      EXPECT_EQ(fast_msg, sax_msg) << bad;
    }
  }
}

// The hash on a second thread gives sha256_bytes' digest; left without get() (a parse error), it stops and
// joins.
TEST(JsonNumbers, BackgroundHashEqualsTheHash) {
  std::string bytes(kBackgroundHashMin + 4097, 'x');
  for (size_t i = 0; i < bytes.size(); i += 4097) bytes[i] = static_cast<char>(i % 251);
  {
    Sha256InBackground hash(bytes.data(), bytes.size(), false);
    EXPECT_EQ(hash.get(), sha256_bytes(bytes.data(), bytes.size()));
  }
  { Sha256InBackground unused(bytes.data(), bytes.size(), false); }
  Sha256InBackground small(bytes.data(), 1000, false);  // under kBackgroundHashMin: hashed in get()
  EXPECT_EQ(small.get(), sha256_bytes(bytes.data(), 1000));
}

// Made from a MappedFile, the hash reads the file the mapping was made from (pread): sha256sum's digest on
// the second thread and in get(), also for an empty file, and still the old bytes' after the path is
// replaced by rename.
TEST_F(JsonNumbersFile, BackgroundHashOfAMappedFileIsTheFilesHash) {
  std::string bytes(kBackgroundHashMin + 4097, 'x');
  for (size_t i = 0; i < bytes.size(); i += 4097) bytes[i] = static_cast<char>(i % 251);
  for (const size_t n : {bytes.size(), size_t{1000}, size_t{0}}) {
    SCOPED_TRACE(n);
    const std::string path = (dir / "w.bin").string(), other = (dir / "other.bin").string();
    std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), static_cast<std::streamsize>(n));
    const std::string want = sha256_file(path);
    const MappedFile file(path);
    Sha256InBackground hash(file, path);
    std::ofstream(other, std::ios::binary | std::ios::trunc) << "replaced";
    std::filesystem::rename(other, path);
    EXPECT_EQ(hash.get(), want);
    { Sha256InBackground unused(file, path); }  // stopped and joined without get()
  }
}

// A file large enough to be hashed on the second thread that fails parsing near its start: the parse error
// is the one reported (in the SAX parser's words), the hash stopped and joined, through load_weights_json
// and load_model alike.
TEST_F(JsonNumbersFile, ParseErrorOfALargeFileWinsOverTheBackgroundHash) {
  std::string text = "{\"a\": [0.5, x";
  text.reserve(kBackgroundHashMin + 64);
  while (text.size() < kBackgroundHashMin + 16) text += ",0.5,-1.25";
  text += "]}";
  const std::string path = (dir / "w.json").string();
  std::ofstream(path, std::ios::binary) << text;
  std::string sax_msg;
  try {
    parse_weights_json_sax(text, path);
  } catch (const Error& e) {
    sax_msg = e.what();
  }
  ASSERT_NE(sax_msg.find("malformed JSON at line 1, column 13"), std::string::npos) << sax_msg;
  for (int via_model = 0; via_model < 2; ++via_model) {
    try {
      if (via_model) {
        load_model(path);
      } else {
        load_weights_json(path);
      }
      ADD_FAILURE() << "loaded";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), sax_msg) << via_model;
    }
  }
}
