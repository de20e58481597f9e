/* replay/ratelimit.c: the rate limiter (Reverb's SampleToInsertRatio semantics).
 *
 * diff = inserts * samples_per_insert - samples must stay in [min_diff, max_diff], where
 * min_diff = spi * min_size - error_buffer and max_diff = spi * min_size + error_buffer:
 * - an insert of n items may go ahead while fewer than min_size items exist (the store fills
 *   freely until sampling can start), else when (inserts + n) * spi - samples <= max_diff;
 * - a sample of n draws may go ahead when size >= min_size and
 *   inserts * spi - samples - n >= min_diff.
 * With spi = 0 there is no ratio: inserts never wait, samples wait only for min_size. */
#include "replay/internal.h"

#include <math.h>

int gb_ratelimit_set(gb_ratelimit *rl, int64_t min_size, double spi, double error_buffer,
                     int64_t max_size, int64_t max_times_sampled, gb_error *err)
{
    if (min_size < 1)
        return gb_error_set(err, GB_EINVAL, "replay: min_size must be >= 1, got %lld",
                            (long long)min_size);
    if (min_size > max_size)
        return gb_error_set(err, GB_EINVAL,
                            "replay: min_size %lld exceeds max_size %lld: sampling could never "
                            "start", (long long)min_size, (long long)max_size);
    if (!isfinite(spi) || spi < 0)
        return gb_error_set(err, GB_EINVAL, "replay: samples_per_insert must be >= 0, got %g", spi);
    if (spi > 0) {
        if (!isfinite(error_buffer) || error_buffer < 0)
            return gb_error_set(err, GB_EINVAL, "replay: error_buffer must be >= 0, got %g",
                                error_buffer);
        /* After inserts stop (diff within spi of max_diff) one sample must fit above min_diff,
         * and after samples stop (diff within 1 of min_diff) one insert must fit below
         * max_diff: max_diff - min_diff = 2 * error_buffer >= spi + 1. */
        if (2.0 * error_buffer < spi + 1.0)
            return gb_error_set(err, GB_EINVAL,
                                "replay: error_buffer %g is too small for samples_per_insert %g: "
                                "2 * error_buffer must be >= samples_per_insert + 1, or inserts "
                                "and samples can block each other forever", error_buffer, spi);
        if (max_times_sampled > 0 && spi > (double)max_times_sampled)
            return gb_error_set(err, GB_EINVAL,
                                "replay: samples_per_insert %g exceeds max_times_sampled %lld: "
                                "items leave before they can supply that many samples, so the "
                                "store would drain below min_size and block", spi,
                                (long long)max_times_sampled);
    }
    rl->min_size = min_size;
    rl->samples_per_insert = spi;
    rl->error_buffer = spi > 0 ? error_buffer : 0;
    rl->min_diff = spi * (double)min_size - rl->error_buffer;
    rl->max_diff = spi * (double)min_size + rl->error_buffer;
    return 0;
}

int gb_ratelimit_can_insert(const gb_ratelimit *rl, uint64_t inserts, uint64_t deletes,
                            uint64_t samples, int64_t n)
{
    if (rl->samples_per_insert <= 0)
        return 1;
    if ((double)inserts + (double)n - (double)deletes <= (double)rl->min_size)
        return 1;
    double diff = ((double)inserts + (double)n) * rl->samples_per_insert - (double)samples;
    return diff <= rl->max_diff;
}

int gb_ratelimit_can_sample(const gb_ratelimit *rl, int64_t size, uint64_t inserts,
                            uint64_t samples, int64_t n)
{
    if (size < rl->min_size)
        return 0;
    if (rl->samples_per_insert <= 0)
        return 1;
    double diff = (double)inserts * rl->samples_per_insert - (double)samples - (double)n;
    return diff >= rl->min_diff;
}

int gb_ratelimit_batch_ok(const gb_ratelimit *rl, int64_t n, gb_error *err)
{
    if (rl->samples_per_insert <= 0)
        return 0;
    if (rl->max_diff - rl->min_diff < rl->samples_per_insert + (double)n)
        return gb_error_set(err, GB_EINVAL,
                            "replay: a batch of %lld samples can never be served with "
                            "samples_per_insert %g and error_buffer %g (needs 2 * error_buffer >= "
                            "samples_per_insert + batch = %g)", (long long)n,
                            rl->samples_per_insert, rl->error_buffer,
                            rl->samples_per_insert + (double)n);
    return 0;
}
