// hash.hpp - content hashes of files (OpenSSL SHA-256), for the provenance of outputs.
#pragma once
#include <cstddef>
#include <string>

namespace attnmap {

/// SHA-256 (FIPS 180-4) of the file's bytes as 64 lower-case hex digits, the same as `sha256sum FILE`.
/// Read in 1 MiB blocks with OpenSSL's EVP interface (SHA-NI / AVX2 code where the CPU has it). Throws
/// attnmap::Error naming `path` when it cannot be opened or read.
std::string sha256_file(const std::string& path);

/// SHA-256 of `bytes`, as sha256_file.
std::string sha256_text(const std::string& bytes);

/// SHA-256 of `n` bytes at `data` (data may be null when n == 0), as sha256_file: the hash of bytes already
/// in memory (a file's mapping), so that what is hashed is what was read. `release_pages`: `data` is the start
/// of a read-only file mapping (MappedFile), whose pages are given back to the system (madvise DONTNEED; a
/// later read faults them in again from the same file) as they are hashed, so hashing adds no resident
/// memory. Throws attnmap::Error when OpenSSL cannot hash.
std::string sha256_bytes(const void* data, size_t n, bool release_pages = false);

}  // namespace attnmap
