#include "server/thread_stack.h"

#include <pthread.h>

#include <cstdint>
#include <cstring>

#include "gtest/gtest.h"

namespace h3::server {
namespace {

// civetweb's worker stack request (USE_STACK_SIZE in Debian's build).
constexpr std::size_t kCivetwebStack = 102400;

TEST(ThreadStackTest, LibrariesBindToTheServersDefinition) {
  EXPECT_TRUE(ThreadStacksCoverTls());
}

TEST(ThreadStackTest, RequestedSizeGetsTheStaticTlsAddedBack) {
  EXPECT_GT(StaticTlsBytes(), 0u);  // libc itself has some
  pthread_attr_t attr;
  ASSERT_EQ(pthread_attr_init(&attr), 0);
  ASSERT_EQ(pthread_attr_setstacksize(&attr, kCivetwebStack), 0);
  std::size_t size = 0;
  ASSERT_EQ(pthread_attr_getstacksize(&attr, &size), 0);
  EXPECT_EQ(size, kCivetwebStack + StaticTlsBytes());
  pthread_attr_destroy(&attr);
}

// As much static TLS as OpenBLAS holds, so that the test does not depend on
// which libraries the linker keeps.
thread_local volatile char tls_like_openblas[60 * 1024];

// Fills most of a civetweb-sized stack, as the worker's path formatting did.
[[gnu::noinline]] int TouchStack() {
  volatile char buffer[kCivetwebStack - 16 * 1024];
  std::memset(const_cast<char*>(buffer), 1, sizeof(buffer));
  return buffer[sizeof(buffer) / 2];
}

// Returns how far the stack reaches below this frame, and uses that much if
// it is there. Without thread_stack.cc glibc leaves 100 KiB - 60 KiB.
void* UseStack(void*) {
  tls_like_openblas[0] = 1;
  pthread_attr_t attr;
  pthread_getattr_np(pthread_self(), &attr);
  void* low = nullptr;
  std::size_t size = 0;
  pthread_attr_getstack(&attr, &low, &size);
  pthread_attr_destroy(&attr);
  const char here = 0;
  const std::uintptr_t reach = reinterpret_cast<std::uintptr_t>(&here) -
                               reinterpret_cast<std::uintptr_t>(low);
  if (reach >= kCivetwebStack - 8192 && TouchStack() != 1) return nullptr;
  return reinterpret_cast<void*>(reach);
}

TEST(ThreadStackTest, ACivetwebSizedThreadCanUseItsWholeStack) {
  EXPECT_GE(StaticTlsBytes(), sizeof(tls_like_openblas));
  pthread_attr_t attr;
  ASSERT_EQ(pthread_attr_init(&attr), 0);
  ASSERT_EQ(pthread_attr_setstacksize(&attr, kCivetwebStack), 0);
  pthread_t thread;
  ASSERT_EQ(pthread_create(&thread, &attr, UseStack, nullptr), 0);
  void* reach = nullptr;
  ASSERT_EQ(pthread_join(thread, &reach), 0);
  EXPECT_GE(reinterpret_cast<std::uintptr_t>(reach), kCivetwebStack - 8192);
  pthread_attr_destroy(&attr);
}

}  // namespace
}  // namespace h3::server
