/*
 * Unit tests of the one loopback test, alone and as the jobs link and the fetcher's transfers use it; and of the
 * address classifier of webhooks (public or not, VTS_WEBHOOK_ALLOW), as the POST's check of webhook_url and the
 * fetcher's connect check use it. Pure functions: no address here is ever connected to.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "common/netaddr.h"
#include "fetcher/egress/transport.h"
#include "fetcher/egress/webhook.h"
#include "gateway/http/hookurl.h"
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

static struct sockaddr_storage addr_of(const char *text) {
  struct sockaddr_storage sa;
  if (netaddr_parse_literal(text, &sa) != 0) fail_msg("%s: not parsed as an address", text);
  return sa;
}

/* Every special-purpose range a webhook must not reach, at its edges; and addresses just outside them. */
static void test_private_loopback_link_local_and_reserved_addresses_are_not_public(void **state) {
  (void)state;
  static const char *const not_public[] = {
      "0.0.0.0",      "0.255.255.255", "10.0.0.1",         "10.255.255.255",  "100.64.0.1",      "100.127.255.254",
      "127.0.0.1",    "127.0.0.3",     "169.254.169.254",  "172.16.0.1",      "172.31.255.255",  "192.0.0.8",
      "192.0.2.1",    "192.88.99.1",   "192.168.1.1",      "198.18.0.1",      "198.19.255.255",  "198.51.100.7",
      "203.0.113.9",  "224.0.0.1",     "239.255.255.250",  "240.0.0.1",       "255.255.255.255", "::",
      "::1",          "[::1]",         "::ffff:127.0.0.1", "::ffff:10.1.2.3", "::127.0.0.1",     "fc00::1",
      "fd12:3456::1", "fe80::1",       "fec0::1",          "ff02::1",         "64:ff9b::a00:1",  "2001:db8::1",
      "2001::1",      "2002:a00:1::1", "100::1",           "4000::1",
  };
  for (size_t i = 0; i < sizeof(not_public) / sizeof(not_public[0]); i++) {
    struct sockaddr_storage sa = addr_of(not_public[i]);
    if (netaddr_is_public((struct sockaddr *)&sa)) fail_msg("%s: judged public", not_public[i]);
  }
  static const char *const public_ones[] = {"1.1.1.1",         "8.8.8.8",         "9.255.255.255",   "11.0.0.1",
                                            "100.63.255.255",  "100.128.0.1",     "172.15.255.255",  "172.32.0.1",
                                            "192.167.255.255", "192.169.0.1",     "223.255.255.254", "::ffff:8.8.8.8",
                                            "2001:4860::8888", "2606:4700::1111", "[2a00:1450::1]"};
  for (size_t i = 0; i < sizeof(public_ones) / sizeof(public_ones[0]); i++) {
    struct sockaddr_storage sa = addr_of(public_ones[i]);
    if (!netaddr_is_public((struct sockaddr *)&sa)) fail_msg("%s: judged not public", public_ones[i]);
  }
}

/* Only IP literals in their standard spellings are addresses; other spellings and names are not. */
static void test_only_standard_address_literals_parse(void **state) {
  (void)state;
  static const char *const not_literals[] = {"127.1",       "2130706433", "0x7f.0.0.1", "0177.0.0.1",   "localhost",
                                             "[127.0.0.1]", "[::1",       "::1]",       "fe80::1%eth0", "",
                                             "1.2.3.4.5"};
  for (size_t i = 0; i < sizeof(not_literals) / sizeof(not_literals[0]); i++) {
    struct sockaddr_storage sa;
    if (netaddr_parse_literal(not_literals[i], &sa) == 0) fail_msg("%s: parsed as an address", not_literals[i]);
  }
}

static void test_the_allow_list_holds_addresses_and_ranges_of_both_families(void **state) {
  (void)state;
  struct netaddr_allow allow;
  char err[128] = "";
  assert_int_equal(netaddr_allow_parse(" 127.0.0.2 , 10.1.0.0/16,fd00::/8,::1", &allow, err, sizeof(err)), 0);
  assert_int_equal(allow.n, 4);
  static const struct {
    const char *addr;
    bool in;
  } cases[] = {
      {"127.0.0.2", true},       {"127.0.0.3", false}, {"10.1.255.255", true}, {"10.2.0.0", false},
      {"fd00::5", true},         {"fe00::5", false},   {"::1", true},          {"::ffff:127.0.0.2", true},
      {"::ffff:10.1.2.3", true}, {"::2", false},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    struct sockaddr_storage sa = addr_of(cases[i].addr);
    if (netaddr_allow_has(&allow, (struct sockaddr *)&sa) != cases[i].in)
      fail_msg("%s: in the list is %d, expected %d", cases[i].addr, !cases[i].in, cases[i].in);
  }
  assert_int_equal(netaddr_allow_parse("", &allow, err, sizeof(err)), 0);
  assert_int_equal(allow.n, 0);
  assert_int_equal(netaddr_allow_parse("0.0.0.0/0", &allow, err, sizeof(err)), 0);
  struct sockaddr_storage any = addr_of("8.8.8.8");
  assert_true(netaddr_allow_has(&allow, (struct sockaddr *)&any));
}

static void test_a_bad_allow_list_entry_is_named(void **state) {
  (void)state;
  static const struct {
    const char *list;
    const char *err;
  } cases[] = {
      {"127.0.0.2,example.com", "\"example.com\" is not an address or a CIDR range"},
      {"10.1.2.3/16", "\"10.1.2.3/16\" is not an address or a CIDR range"},
      {"10.0.0.0/33", "\"10.0.0.0/33\" is not an address or a CIDR range"},
      {"fd00::/129", "\"fd00::/129\" is not an address or a CIDR range"},
      {"10.0.0.0/", "\"10.0.0.0/\" is not an address or a CIDR range"},
      {"127.0.0.1,,127.0.0.2", "\"\" is not an address or a CIDR range"},
      {"127.1", "\"127.1\" is not an address or a CIDR range"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    struct netaddr_allow allow;
    char err[128] = "";
    if (netaddr_allow_parse(cases[i].list, &allow, err, sizeof(err)) != -EINVAL)
      fail_msg("%s: accepted", cases[i].list);
    assert_string_equal(err, cases[i].err);
  }
  char many[1024] = "";
  for (int i = 0; i <= NETADDR_MAX_ALLOW; i++)
    snprintf(many + strlen(many), sizeof(many) - strlen(many), "%s127.0.0.%d", i ? "," : "", i + 1);
  struct netaddr_allow allow;
  char err[128] = "";
  assert_int_equal(netaddr_allow_parse(many, &allow, err, sizeof(err)), -EINVAL);
  assert_string_equal(err, "more than 32 entries");
}

/* The fetcher's connect check: public over https only, anything allowed over either. */
static void test_the_fetcher_connects_to_public_addresses_over_https_and_allowed_ones_over_both(void **state) {
  (void)state;
  struct netaddr_allow allow;
  char err[128];
  assert_int_equal(netaddr_allow_parse("127.0.0.2,192.168.5.0/24", &allow, err, sizeof(err)), 0);
  static const struct {
    const char *addr;
    int https, ok;
  } cases[] = {
      {"8.8.8.8", 1, 1},          {"8.8.8.8", 0, 0},         {"127.0.0.2", 0, 1},   {"127.0.0.2", 1, 1},
      {"127.0.0.1", 1, 0},        {"127.0.0.3", 0, 0},       {"192.168.5.9", 0, 1}, {"192.168.6.9", 1, 0},
      {"10.0.0.1", 1, 0},         {"169.254.169.254", 1, 0}, {"::1", 1, 0},         {"fe80::1", 1, 0},
      {"::ffff:127.0.0.2", 0, 1}, {"2001:4860::8888", 1, 1},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    struct sockaddr_storage sa = addr_of(cases[i].addr);
    if (webhook_address_allowed(&allow, cases[i].https, (struct sockaddr *)&sa) != cases[i].ok)
      fail_msg("%s over %s: allowed is %d, expected %d", cases[i].addr, cases[i].https ? "https" : "http", !cases[i].ok,
               cases[i].ok);
  }
}

/* The POST's check of webhook_url with addresses outside 127.0.0.0/8, which the integration tests never use. */
static void test_a_webhook_url_to_an_address_is_judged_by_the_classifier(void **state) {
  (void)state;
  struct netaddr_allow allow;
  char err[128];
  assert_int_equal(netaddr_allow_parse("127.0.0.2,10.9.0.0/16,fd00::/8", &allow, err, sizeof(err)), 0);
  static const struct {
    const char *url;
    enum hookurl_verdict want;
  } cases[] = {
      {"https://8.8.8.8/hook", HOOKURL_OK},
      {"https://[2001:4860::8888]:8443/hook", HOOKURL_OK},
      {"http://8.8.8.8/hook", HOOKURL_REFUSED},
      {"https://10.0.0.1/hook", HOOKURL_REFUSED},
      {"https://10.9.1.1/hook", HOOKURL_OK},
      {"http://10.9.1.1:8080/hook", HOOKURL_OK},
      {"https://192.168.1.1/", HOOKURL_REFUSED},
      {"https://172.16.0.1/", HOOKURL_REFUSED},
      {"https://169.254.169.254/latest/meta-data/", HOOKURL_REFUSED},
      {"https://100.64.0.1/", HOOKURL_REFUSED},
      {"https://[::1]/", HOOKURL_REFUSED},
      {"https://[fe80::1]/", HOOKURL_REFUSED},
      {"https://[fd00::1]/", HOOKURL_OK},
      {"http://[fd00::1]/", HOOKURL_OK},
      {"https://[fc00::1]/", HOOKURL_REFUSED},
      {"https://[::ffff:10.0.0.1]/", HOOKURL_REFUSED},
      {"https://[::ffff:127.0.0.2]/", HOOKURL_OK},
      {"https://0.0.0.0/", HOOKURL_REFUSED},
      {"https://[fe80::1%25eth0]/", HOOKURL_MALFORMED},
      {"https://010.0.0.1/", HOOKURL_MALFORMED},
      {"https://hooks.example./in", HOOKURL_OK},
      {"https://a_b.example/", HOOKURL_MALFORMED},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    char msg[160];
    enum hookurl_verdict got = hookurl_check(cases[i].url, strlen(cases[i].url), &allow, msg, sizeof(msg));
    if (got != cases[i].want) fail_msg("%s: verdict %d, expected %d (%s)", cases[i].url, got, cases[i].want, msg);
    if (got != HOOKURL_OK && strstr(msg, "webhook_url") != msg) fail_msg("%s: message %s", cases[i].url, msg);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_loopback_addresses_and_localhost_are_loopback),
      cmocka_unit_test(test_names_and_other_addresses_are_not_loopback),
      cmocka_unit_test(test_jobs_link_urls_use_the_parsed_host),
      cmocka_unit_test(test_plain_http_is_allowed_to_loopback_hosts_only),
      cmocka_unit_test(test_private_loopback_link_local_and_reserved_addresses_are_not_public),
      cmocka_unit_test(test_only_standard_address_literals_parse),
      cmocka_unit_test(test_the_allow_list_holds_addresses_and_ranges_of_both_families),
      cmocka_unit_test(test_a_bad_allow_list_entry_is_named),
      cmocka_unit_test(test_the_fetcher_connects_to_public_addresses_over_https_and_allowed_ones_over_both),
      cmocka_unit_test(test_a_webhook_url_to_an_address_is_judged_by_the_classifier),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
