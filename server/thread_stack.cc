#include "server/thread_stack.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>

#include <cerrno>
#include <cstdint>

namespace h3::server {
namespace {

using SetStackSize = int (*)(pthread_attr_t*, std::size_t);

int AddTls(dl_phdr_info* info, std::size_t, void* data) {
  auto* total = static_cast<std::size_t*>(data);
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& header = info->dlpi_phdr[i];
    if (header.p_type != PT_TLS) continue;
    const std::size_t align = header.p_align > 0 ? header.p_align : 1;
    *total += (header.p_memsz + align - 1) / align * align;
  }
  return 0;
}

SetStackSize GlibcSetStackSize() {
  static const auto real = reinterpret_cast<SetStackSize>(
      dlsym(RTLD_NEXT, "pthread_attr_setstacksize"));
  return real;
}

}  // namespace

std::size_t StaticTlsBytes() {
  static const std::size_t bytes = [] {
    std::size_t total = 0;
    dl_iterate_phdr(AddTls, &total);
    return total;
  }();
  return bytes;
}

bool ThreadStacksCoverTls() {
  void* resolved = dlsym(RTLD_DEFAULT, "pthread_attr_setstacksize");
  return resolved == reinterpret_cast<void*>(&pthread_attr_setstacksize);
}

}  // namespace h3::server

// Replaces glibc's for the whole process (see thread_stack.h). Sizes that
// would overflow on adding the TLS are passed through for glibc to judge.
extern "C" int pthread_attr_setstacksize(pthread_attr_t* attr,
                                         std::size_t size) noexcept {
  const auto real = h3::server::GlibcSetStackSize();
  if (real == nullptr) return ENOSYS;
  const std::size_t extra = h3::server::StaticTlsBytes();
  if (size <= SIZE_MAX - extra) size += extra;
  return real(attr, size);
}
