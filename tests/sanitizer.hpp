// sanitizer.hpp - whether the tests are built with AddressSanitizer.
#pragma once

// Built with AddressSanitizer (gcc defines __SANITIZE_ADDRESS__, clang has __has_feature): its shadow memory
// takes terabytes of address space and its allocator keeps freed memory, so address-space limits (ulimit -v)
// and resident-memory bounds measure the sanitizer, not attnmap; such checks run in the plain build only.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kAddressSanitizer = true;
#else
inline constexpr bool kAddressSanitizer = false;
#endif
#else
inline constexpr bool kAddressSanitizer = false;
#endif
