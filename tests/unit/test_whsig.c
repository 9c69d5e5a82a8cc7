/*
 * Unit tests of webhook signatures: the MAC equals the one openssl's own command computes over the same bytes (an
 * independent HMAC-SHA256), secrets are made and read as the standard writes them, and what is not a secret is refused.
 * and the standard's reference verifier (npm standardwebhooks, installed in tests/contract by tests/run.sh) accepts
 * what we sign and refuses what we did not.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/util.h"
#include "common/whsig.h"
#include "tests/unit/test_skip.h"

/* HMAC-SHA256 of msg with the hex key, base64, by the openssl command. */
static void openssl_mac(const char *hexkey, const char *msg, char *out, size_t outlen) {
  char path[] = "/tmp/vts-whsig.XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, msg, strlen(msg)), (ssize_t)strlen(msg));
  close(fd);
  char cmd[512];
  snprintf(cmd, sizeof(cmd), "openssl dgst -sha256 -mac HMAC -macopt hexkey:%s -binary '%s' | openssl base64 -A",
           hexkey, path);
  FILE *p = popen(cmd, "r");
  assert_non_null(p);
  assert_non_null(fgets(out, (int)outlen, p));
  assert_int_equal(pclose(p), 0);
  unlink(path);
}

static void test_a_signature_is_the_hmac_of_id_timestamp_and_body(void **state) {
  (void)state;
  /* "whsec_" + base64 of the bytes 00 01 02 ... 17. */
  const char *secret = "whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYX";
  const char *body = "{\"id\":\"j1\",\"status\":\"done\"}";
  char sig[WHSIG_SIGNATURE_LEN + 1];
  assert_int_equal(whsig_sign(secret, "msg_1", 1764115200, body, strlen(body), sig, sizeof(sig)), 0);
  char want[128];
  openssl_mac("000102030405060708090a0b0c0d0e0f1011121314151617",
              "msg_1.1764115200.{\"id\":\"j1\",\"status\":\"done\"}", want, sizeof(want));
  assert_int_equal(strlen(sig), WHSIG_SIGNATURE_LEN);
  assert_memory_equal(sig, "v1,", 3);
  assert_string_equal(sig + 3, want);
  /* Every part is signed. */
  char other[WHSIG_SIGNATURE_LEN + 1];
  assert_int_equal(whsig_sign(secret, "msg_2", 1764115200, body, strlen(body), other, sizeof(other)), 0);
  assert_string_not_equal(sig, other);
  assert_int_equal(whsig_sign(secret, "msg_1", 1764115201, body, strlen(body), other, sizeof(other)), 0);
  assert_string_not_equal(sig, other);
  assert_int_equal(whsig_sign(secret, "msg_1", 1764115200, body, strlen(body) - 1, other, sizeof(other)), 0);
  assert_string_not_equal(sig, other);
}

static void test_a_new_secret_is_the_standards_form_and_signs(void **state) {
  (void)state;
  char a[WHSIG_SECRET_LEN + 1], b[WHSIG_SECRET_LEN + 1];
  assert_int_equal(whsig_secret_new(a, sizeof(a)), 0);
  assert_int_equal(whsig_secret_new(b, sizeof(b)), 0);
  assert_int_equal(strlen(a), WHSIG_SECRET_LEN);
  assert_memory_equal(a, "whsec_", 6);
  assert_string_not_equal(a, b);
  char sig[WHSIG_SIGNATURE_LEN + 1];
  assert_int_equal(whsig_sign(a, "m", 1, "x", 1, sig, sizeof(sig)), 0);
  assert_int_equal(whsig_secret_new(a, WHSIG_SECRET_LEN), -EINVAL);
}

static void test_what_is_not_a_secret_is_refused(void **state) {
  (void)state;
  char sig[WHSIG_SIGNATURE_LEN + 1];
  static const char *const bad[] = {"", "whsec_", "AAECAwQF", "whsec_AAE", "whsec_****", "whsec_AAECAwQF\n"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    if (whsig_sign(bad[i], "m", 1, "x", 1, sig, sizeof(sig)) != -EINVAL) fail_msg("accepted \"%s\"", bad[i]);
  }
  /* Padding counts right: one key byte. */
  assert_int_equal(whsig_sign("whsec_AA==", "m", 1, "x", 1, sig, sizeof(sig)), 0);
  char want[128];
  openssl_mac("00", "m.1.x", want, sizeof(want));
  assert_string_equal(sig + 3, want);
  assert_int_equal(whsig_sign("whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYX", "m", 1, "x", 1, sig, WHSIG_SIGNATURE_LEN),
                   -EINVAL);
}

/* Runs the reference verifier on one delivery; returns its exit status. */
static int reference_verify(const char *secret, const char *id, const char *ts, const char *sig, const char *body) {
  const char *data = getenv("VTS_TEST_DATA"); /* tests/data: the verifier is in tests/contract */
  char dir[1024], cmd[4096];
  snprintf(dir, sizeof(dir), "%s/../contract", data ? data : "tests/data");
  snprintf(cmd, sizeof(cmd), "%s/node_modules/standardwebhooks/package.json", dir);
  if (access(cmd, R_OK) != 0) TEST_SKIP("tests/contract/node_modules lacks standardwebhooks: run npm ci there");
  snprintf(cmd, sizeof(cmd), "printf '%%s' '%s' | node '%s/verify_webhook.mjs' '%s' '%s' '%s' '%s' 2>/dev/null", body,
           dir, secret, id, ts, sig);
  int rc = system(cmd);
  return rc == -1 ? -1 : WEXITSTATUS(rc);
}

static void test_the_reference_verifier_accepts_our_signatures(void **state) {
  (void)state;
  char secret[WHSIG_SECRET_LEN + 1], sig[WHSIG_SIGNATURE_LEN + 1], ts[24];
  assert_int_equal(whsig_secret_new(secret, sizeof(secret)), 0);
  int64_t now = util_wall_s();
  snprintf(ts, sizeof(ts), "%lld", (long long)now);
  const char *body = "{\"id\":\"j1\",\"status\":\"done\",\"counts\":{\"done\":3}}";
  assert_int_equal(whsig_sign(secret, "msg_j1_1", now, body, strlen(body), sig, sizeof(sig)), 0);
  assert_int_equal(reference_verify(secret, "msg_j1_1", ts, sig, body), 0);
  /* Another body, id or secret does not verify. */
  assert_int_equal(reference_verify(secret, "msg_j1_1", ts, sig, "{}"), 1);
  assert_int_equal(reference_verify(secret, "msg_j1_2", ts, sig, body), 1);
  char other[WHSIG_SECRET_LEN + 1];
  assert_int_equal(whsig_secret_new(other, sizeof(other)), 0);
  assert_int_equal(reference_verify(other, "msg_j1_1", ts, sig, body), 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_a_signature_is_the_hmac_of_id_timestamp_and_body),
      cmocka_unit_test(test_a_new_secret_is_the_standards_form_and_signs),
      cmocka_unit_test(test_what_is_not_a_secret_is_refused),
      cmocka_unit_test(test_the_reference_verifier_accepts_our_signatures),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
