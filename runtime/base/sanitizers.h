/* runtime/base/sanitizers.h: which sanitizers the including file is compiled with, asked the way
 * each compiler answers: GCC defines __SANITIZE_ADDRESS__ and __SANITIZE_THREAD__, clang (14)
 * neither, answering __has_feature instead. Code that must behave differently under a sanitizer
 * (a worker that returns from main for LeakSanitizer, a test that reads RSS) asks these.
 * defines: GB_ASAN, GB_TSAN (1 or 0) */
#ifndef GB_RUNTIME_BASE_SANITIZERS_H
#define GB_RUNTIME_BASE_SANITIZERS_H

#if defined(__SANITIZE_ADDRESS__)
#define GB_ASAN 1
#endif
#if defined(__SANITIZE_THREAD__)
#define GB_TSAN 1
#endif
#if defined(__has_feature)
#if !defined(GB_ASAN) && __has_feature(address_sanitizer)
#define GB_ASAN 1
#endif
#if !defined(GB_TSAN) && __has_feature(thread_sanitizer)
#define GB_TSAN 1
#endif
#endif
#ifndef GB_ASAN
#define GB_ASAN 0
#endif
#ifndef GB_TSAN
#define GB_TSAN 0
#endif

#endif
