#ifndef H3_SERVER_THREAD_STACK_H_
#define H3_SERVER_THREAD_STACK_H_

#include <cstddef>

// glibc carves a thread's static TLS out of the stack size its creator asks
// for (glibc bug 11787). civetweb, which serves /metrics under prometheus-cpp,
// asks for 100 KiB per worker; OpenBLAS alone holds 60 KiB of static TLS and
// the CUDA runtime 4 KiB more, which left the workers too little stack to
// format a path. The server therefore defines pthread_attr_setstacksize (in
// thread_stack.cc, exported from the executable so that shared libraries bind
// to it): every requested size gets the process's static TLS added back, the
// remedy Rust's standard library applies with __pthread_get_minstack.

namespace h3::server {

// Bytes of static TLS of the objects loaded at startup, each rounded up to
// its alignment.
std::size_t StaticTlsBytes();

// Whether pthread_attr_setstacksize, as the dynamic linker resolves it for
// shared libraries, is the one in thread_stack.cc.
bool ThreadStacksCoverTls();

}  // namespace h3::server

#endif  // H3_SERVER_THREAD_STACK_H_
