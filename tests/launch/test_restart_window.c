/* tests/launch/test_restart_window.c: launch.restart's sliding window for one slot
 * (launch/restart_window.h): max_restarts within any window_s, then refused until the oldest of
 * them is window_s old (a restart exactly window_s old is out, as the watchdog counts);
 * max_restarts 0 refuses the first. */
#include "launch/restart_window.h"
#include "test.h"

int main(void)
{
    gb_restart_window w = {0};
    CHECK(!gb_restart_window_allows(&w, 0.0, 0, 60.0)); /* 0: a death ends it */
    for (int i = 0; i < 3; i++) {
        CHECK(gb_restart_window_allows(&w, 10.0 * i, 3, 60.0));
        CHECK(gb_restart_window_note(&w, 10.0 * i) == 0);
    }
    CHECK(!gb_restart_window_allows(&w, 25.0, 3, 60.0)); /* 0, 10, 20 within 60 s of 25 */
    CHECK(!gb_restart_window_allows(&w, 59.5, 3, 60.0));
    CHECK(gb_restart_window_allows(&w, 60.0, 3, 60.0)); /* 0 is 60 s old: out, as the watchdog */
    CHECK(gb_restart_window_allows(&w, 60.5, 3, 60.0)); /* counts (more than now - window_s) */
    CHECK(gb_restart_window_note(&w, 60.5) == 0);
    CHECK(!gb_restart_window_allows(&w, 65.0, 3, 60.0)); /* 10, 20, 60.5 */
    CHECK(gb_restart_window_allows(&w, 1000.0, 3, 60.0));
    for (int i = 0; i < 100; i++) /* the list grows as it must */
        CHECK(gb_restart_window_note(&w, 2000.0 + i) == 0);
    CHECK(w.n == 104 && !gb_restart_window_allows(&w, 2100.0, 59, 60.0)); /* 2041..2099 */
    CHECK(gb_restart_window_allows(&w, 2100.0, 60, 60.0));
    gb_restart_window_free(&w);
    CHECK(w.n == 0 && w.at == NULL);
    return test_main_result();
}
