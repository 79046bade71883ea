#include "platform/clock.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <cstdio>
#include <ctime>

namespace folio::service {

std::int64_t now_unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string now_iso() { return iso_time(now_unix_ms()); }

iso_chars iso_time_chars(std::int64_t ms) {
  iso_chars out{};
  constexpr std::int64_t year_10000 = 253402300800000;  // 10000-01-01T00:00:00.000Z
  if (ms < 0 || ms >= year_10000) {  // outside four-digit years after 1970: the C library's conversion
    const std::int64_t secs_floor = ms / 1000 - (ms % 1000 < 0 ? 1 : 0);
    const std::time_t secs = static_cast<std::time_t>(secs_floor);
    std::tm tm{};
    gmtime_r(&secs, &tm);
    char buf[64];
    const int n = std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                                tm.tm_sec, static_cast<int>(ms - secs_floor * 1000));
    out.size = static_cast<std::size_t>(std::min(n, static_cast<int>(out.text.size())));
    std::memcpy(out.text.data(), buf, out.size);
    return out;
  }
  // The civil date by the calendar arithmetic of <chrono> (no time zone database, no lock: gmtime_r
  // takes glibc's process-wide time zone lock, which every worker's log line would take), then the digits
  // by hand.
  using namespace std::chrono;
  const sys_days day = floor<days>(sys_time<milliseconds>(milliseconds(ms)));
  const year_month_day ymd(day);
  std::int64_t in_day = ms - duration_cast<milliseconds>(day.time_since_epoch()).count();  // 0 .. 86,399,999
  char* p = out.text.data();
  auto digits = [&](unsigned v, int n) {
    for (int i = n - 1; i >= 0; --i) p[i] = static_cast<char>('0' + v % 10), v /= 10;
    p += n;
  };
  auto put = [&](char c) { *p++ = c; };
  digits(static_cast<unsigned>(static_cast<int>(ymd.year())), 4), put('-');
  digits(static_cast<unsigned>(ymd.month()), 2), put('-');
  digits(static_cast<unsigned>(ymd.day()), 2), put('T');
  digits(static_cast<unsigned>(in_day / 3600000), 2), put(':'), in_day %= 3600000;
  digits(static_cast<unsigned>(in_day / 60000), 2), put(':'), in_day %= 60000;
  digits(static_cast<unsigned>(in_day / 1000), 2), put('.');
  digits(static_cast<unsigned>(in_day % 1000), 3), put('Z');
  out.size = static_cast<std::size_t>(p - out.text.data());
  return out;
}

std::string iso_time(std::int64_t ms) { return std::string(iso_time_chars(ms).view()); }

}  // namespace folio::service
