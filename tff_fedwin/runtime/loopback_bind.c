/* LD_PRELOAD shim: a socket bound to a wildcard address is bound to loopback.
 *
 *   0.0.0.0         (AF_INET)  -> 127.0.0.1
 *   ::              (AF_INET6) -> ::1
 *   ::ffff:0.0.0.0  (AF_INET6) -> ::ffff:127.0.0.1
 *
 * TFF's worker_binary serves unauthenticated gRPC on [::]:port and has no flag
 * for the address; tff_fedwin.runtime.loopback preloads this library into it.
 * Any other bind() is passed through unchanged.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

typedef int (*bind_fn)(int, const struct sockaddr *, socklen_t);

/* The last four bytes of ::ffff:a.b.c.d hold a.b.c.d. */
static int is_v4_mapped_any(const struct in6_addr *addr) {
  static const unsigned char any[4] = {0, 0, 0, 0};
  return IN6_IS_ADDR_V4MAPPED(addr) && memcmp(&addr->s6_addr[12], any, 4) == 0;
}

int bind(int fd, const struct sockaddr *addr, socklen_t len) {
  static bind_fn real_bind = NULL;
  if (real_bind == NULL) {
    real_bind = (bind_fn)dlsym(RTLD_NEXT, "bind");
    if (real_bind == NULL) {
      errno = ENOSYS;
      return -1;
    }
  }
  if (addr != NULL && addr->sa_family == AF_INET6 &&
      len >= (socklen_t)sizeof(struct sockaddr_in6)) {
    struct sockaddr_in6 a;
    memcpy(&a, addr, sizeof(a));
    if (IN6_IS_ADDR_UNSPECIFIED(&a.sin6_addr)) {
      a.sin6_addr = in6addr_loopback;
      return real_bind(fd, (const struct sockaddr *)&a, sizeof(a));
    }
    if (is_v4_mapped_any(&a.sin6_addr)) {
      const unsigned char loopback[4] = {127, 0, 0, 1};
      memcpy(&a.sin6_addr.s6_addr[12], loopback, 4);
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
