#include "gateway/dispatcher/counters.h"

#include "gateway/metrics/metrics.h"

_Static_assert(DC__COUNT <= METRICS_MAX_COUNTERS, "the metrics region has no room for every dispatcher counter");

static const struct metrics_counter rows[DC__COUNT] = {
#define COUNTER_ROW_(field, type, metric, labels, help) [DC_##field] = {metric, #type, labels, help},
    DISPATCHER_COUNTERS(COUNTER_ROW_)
#undef COUNTER_ROW_
};

void counters_metrics_register(void) {
  static const struct metrics_counter_family family = {
      .ncounters = DC__COUNT,
      .rows = rows,
      .fetchers_connected = DC_fetchers_connected,
  };
  metrics_register_counters(&family);
}
