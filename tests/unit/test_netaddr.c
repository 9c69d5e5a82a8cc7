/* Unit tests of the one loopback test, alone and as the jobs link and the fetcher's transfers use it. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "common/netaddr.h"
#include "fetcher/egress/transport.h"
#include "proto/link.h"

static void test_loopback_addresses_and_localhost_are_loopback(void **state) {
  (void)state;
  assert_true(netaddr_is_loopback("127.0.0.1"));
  assert_true(netaddr_is_loopback("127.255.0.9"));
  assert_true(netaddr_is_loopback("::1"));
  assert_true(netaddr_is_loopback("[::1]"));
  assert_true(netaddr_is_loopback("0:0:0:0:0:0:0:1"));
  assert_true(netaddr_is_loopback("localhost"));
  assert_true(netaddr_is_loopback("LocalHost"));
}

/* A name that starts like a loopback address is a name: someone else's server answers for it. */
static void test_names_and_other_addresses_are_not_loopback(void **state) {
  (void)state;
  assert_false(netaddr_is_loopback("127.attacker.example"));
  assert_false(netaddr_is_loopback("127.0.0.1.attacker.example"));
  assert_false(netaddr_is_loopback("localhost.attacker.example"));
  assert_false(netaddr_is_loopback("128.0.0.1"));
  assert_false(netaddr_is_loopback("10.0.0.1"));
  assert_false(netaddr_is_loopback("::2"));
  assert_false(netaddr_is_loopback("[::1"));
  assert_false(netaddr_is_loopback("::1]"));
  assert_false(netaddr_is_loopback("[::1]:8080"));
  assert_false(netaddr_is_loopback(""));
  assert_false(netaddr_is_loopback(NULL));
}

static void test_jobs_link_urls_use_the_parsed_host(void **state) {
  (void)state;
  assert_true(link_url_loopback("tcp://127.0.0.1:5555"));
  assert_true(link_url_loopback("tcp://[::1]:5555"));
  assert_true(link_url_loopback("tls+tcp://localhost:5555"));
  assert_false(link_url_loopback("tcp://127.attacker.example:5555"));
  assert_false(link_url_loopback("tcp://[::2]:5555"));
  assert_false(link_url_loopback("tcp://10.0.0.1:5555"));
}

/* Plain http only to the machine itself, with the host as a URL's parts give it. */
static void test_plain_http_is_allowed_to_loopback_hosts_only(void **state) {
  (void)state;
  static const struct {
    const char *url;
    int want;
  } cases[] = {
      {"http://127.0.0.1:8080/youtubei/v1/player", 0},
      {"http://[::1]:8080/youtubei/v1/player", 0},
      {"http://localhost/youtubei/v1/player", 0},
      {"http://127.attacker.example:8080/youtubei/v1/player", -EPERM},
      {"http://127.attacker.example/youtubei/v1/player", -EPERM},
      {"https://127.attacker.example/youtubei/v1/player", 0},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    char scheme[16], host[256], port[16];
    assert_int_equal(transport_url_parts(cases[i].url, scheme, sizeof(scheme), host, sizeof(host), port, sizeof(port)),
                     0);
    int got = transport_scheme_allowed(scheme, host);
    if (got != cases[i].want)
      fail_msg("%s: transport_scheme_allowed gave %d, expected %d", cases[i].url, got, cases[i].want);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_loopback_addresses_and_localhost_are_loopback),
      cmocka_unit_test(test_names_and_other_addresses_are_not_loopback),
      cmocka_unit_test(test_jobs_link_urls_use_the_parsed_host),
      cmocka_unit_test(test_plain_http_is_allowed_to_loopback_hosts_only),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
