/*
 * The one way a unit test skips for a missing tool or fixture: the reason is printed and appended to $VTS_SKIP_LOG
 * (tests/run.sh counts those lines in its summary), and under CI=true the skip is a failure instead, so a machine
 * without what a test needs cannot pass for green. TEST_SKIP needs <cmocka.h>.
 */
#ifndef VTS_TEST_SKIP_H
#define VTS_TEST_SKIP_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Prints shown and appends "FILE: logged" to $VTS_SKIP_LOG, FILE being the base name of file. */
static inline void test_skip_log(const char *file, const char *shown, const char *logged) {
  const char *base = strrchr(file, '/');
  base = base != NULL ? base + 1 : file;
  printf("%s\n", shown);
  const char *log = getenv("VTS_SKIP_LOG");
  FILE *f = log != NULL && log[0] != '\0' ? fopen(log, "a") : NULL;
  if (f != NULL) {
    fprintf(f, "%s: %s\n", base, logged);
    fclose(f);
  }
}

/* Records a skip of file's test for why. Returns whether the skip must fail instead (CI=true). */
static inline int test_skip_record(const char *file, const char *why) {
  char shown[320];
  snprintf(shown, sizeof(shown), "skipped: %s", why);
  test_skip_log(file, shown, why);
  const char *ci = getenv("CI");
  return ci != NULL && strcasecmp(ci, "true") == 0;
}

/* Skips the running test with a printf-style reason, or fails it under CI=true. */
#define TEST_SKIP(...)                                                                                               \
  do {                                                                                                               \
    char why_[256];                                                                                                  \
    snprintf(why_, sizeof(why_), __VA_ARGS__);                                                                       \
    if (test_skip_record(__FILE__, why_)) fail_msg("skipped under CI=true, which makes a skip a failure: %s", why_); \
    skip();                                                                                                          \
  } while (0)

/*
 * What a checkout may lack by design rather than a tool to install (the platform captures, kept outside the
 * repository: "captures") ends a test as "not run here (WHAT): why", listed and counted by tests/run.sh apart from the
 * skips and no failure under CI=true; a run that must have it names it in $VTS_REQUIRE (comma-separated, as .ci/run
 * does), where its absence fails the test.
 */
static inline int test_required(const char *what) {
  const char *req = getenv("VTS_REQUIRE");
  size_t n = strlen(what);
  for (const char *p = req; p != NULL && *p != '\0';) {
    size_t len = strcspn(p, ",");
    if (len == n && strncmp(p, what, n) == 0) return 1;
    p += len + (p[len] == ',');
  }
  return 0;
}

/* Records that file's test did not run here for lack of what. Returns whether that must fail instead. */
static inline int test_not_here_record(const char *file, const char *what, const char *why) {
  if (test_required(what)) return 1;
  char line[320];
  snprintf(line, sizeof(line), "not run here (%s): %s", what, why);
  test_skip_log(file, line, line);
  return 0;
}

/* The captures' how-to, for the reason of a test that needs them. */
#define TEST_CAPTURES_HOWTO                                                                                      \
  "the platform captures are kept outside the repository: put their folder (youtube-transcript-api/, newpipe/) " \
  "at ../shared/fixtures beside the checkout, or set VTS_SHARED_FIXTURES to it"

/* Ends the running test: not run here for lack of what, or failed when $VTS_REQUIRE names what. */
#define TEST_NOT_HERE(what, ...)                                                 \
  do {                                                                           \
    char why_[256];                                                              \
    snprintf(why_, sizeof(why_), __VA_ARGS__);                                   \
    if (test_not_here_record(__FILE__, what, why_))                              \
      fail_msg("%s is required here (VTS_REQUIRE) but missing: %s", what, why_); \
    skip();                                                                      \
  } while (0)

#endif
