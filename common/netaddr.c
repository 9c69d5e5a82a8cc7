#include "common/netaddr.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <strings.h>

bool netaddr_is_loopback(const char *host) {
  if (host == NULL) return false;
  if (strcasecmp(host, "localhost") == 0) return true;
  struct in_addr a4;
  if (inet_pton(AF_INET, host, &a4) == 1) return (ntohl(a4.s_addr) >> 24) == 127;
  char bare[INET6_ADDRSTRLEN];
  size_t n = strlen(host);
  if (n >= 2 && host[0] == '[' && host[n - 1] == ']') {
    if (n - 2 >= sizeof(bare)) return false;
    memcpy(bare, host + 1, n - 2);
    bare[n - 2] = '\0';
    host = bare;
  }
  struct in6_addr a6;
  return inet_pton(AF_INET6, host, &a6) == 1 && IN6_IS_ADDR_LOOPBACK(&a6);
}
