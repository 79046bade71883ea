// The service's clock (service/platform/clock.hpp).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <ctime>
#include <random>
#include <string>

#include "support.hpp"

namespace {

using namespace folio_service_test;

TEST(Clock, IsoTimeWritesWhatTheCLibraryConvertsForEveryKindOfDate) {
  auto reference = [](std::int64_t ms) {  // gmtime_r and printf, as iso_time did
    const std::int64_t secs_floor = ms / 1000 - (ms % 1000 < 0 ? 1 : 0);
    const std::time_t secs = static_cast<std::time_t>(secs_floor);
    std::tm tm{};
    gmtime_r(&secs, &tm);
    char buf[64];
    std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                  static_cast<int>(ms - secs_floor * 1000));
    return std::string(buf);
  };
  std::vector<std::int64_t> at = {0, 1, 999, 1000, 86399999, 86400000, 951782400000 /* 2000-02-29 */, 4107456000000 /* 2100-02-28 */,
                                  4107542400000 /* 2100-03-01 */, 13574563200000 /* 2400-02-29 */, 253402300799999, 253402300800000, -1, -86400001};
  std::mt19937_64 rng(23);
  for (int i = 0; i < 100000; ++i) at.push_back(static_cast<std::int64_t>(rng() % 253402300800000));
  for (std::int64_t ms : at) ASSERT_EQ(svc::iso_time(ms), reference(ms)) << ms;
  EXPECT_EQ(svc::iso_time(951782400123), "2000-02-29T00:00:00.123Z");
}

}  // namespace
