/* LD_PRELOAD shim: a process that binds a socket to the wildcard address
 * (0.0.0.0 or ::) is bound to the loopback address (127.0.0.1 or ::1) instead.
 *
 * TFF's worker_binary serves gRPC on [::]:port, i.e. on every network interface,
 * without authentication, and has no flag to choose the address. Preloading this
 * library makes a worker started by tff_fedwin.runtime reachable from this
 * machine only. Any other bind() is passed through unchanged.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

typedef int (*bind_fn)(int, const struct sockaddr *, socklen_t);

int bind(int fd, const struct sockaddr *addr, socklen_t len) {
  static bind_fn real_bind = NULL;
  if (real_bind == NULL) {
    real_bind = (bind_fn)dlsym(RTLD_NEXT, "bind");
  }
  if (addr != NULL && addr->sa_family == AF_INET6 &&
      len >= (socklen_t)sizeof(struct sockaddr_in6)) {
    struct sockaddr_in6 a;
    memcpy(&a, addr, sizeof(a));
    if (IN6_IS_ADDR_UNSPECIFIED(&a.sin6_addr)) {
      a.sin6_addr = in6addr_loopback;
      return real_bind(fd, (const struct sockaddr *)&a, sizeof(a));
    }
  } else if (addr != NULL && addr->sa_family == AF_INET &&
             len >= (socklen_t)sizeof(struct sockaddr_in)) {
    struct sockaddr_in a;
    memcpy(&a, addr, sizeof(a));
    if (a.sin_addr.s_addr == htonl(INADDR_ANY)) {
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      return real_bind(fd, (const struct sockaddr *)&a, sizeof(a));
    }
  }
  return real_bind(fd, addr, len);
}
