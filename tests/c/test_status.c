/* core/sys/status.h's messages: rp_error's NaN written "nan" whatever sign printf gives it (x86's
 * 0.0 / 0.0 has the sign bit set and glibc prints "-nan"; other machines print "nan"), while a
 * "-nan" inside a word (a path, a name) stays as it is.
 */
#include <math.h>
#include <string.h>

#include "check.h"
#include "rp.h"

static void test_nan_unsigned(void)
{
    volatile double zero = 0.0;
    double nan_neg = -fabs(zero / zero), nan_pos = fabs(zero / zero);
    CHECK(signbit(nan_neg) && isnan(nan_neg), "a NaN with its sign bit set");
    CHECK_MSG(rp_error(RP_ERR_ARG, "lr must be a finite number, got %g", nan_neg), RP_ERR_ARG,
              "lr must be a finite number, got nan");
    CHECK_MSG(rp_error(RP_ERR_ARG, "lr must be a finite number, got %g", nan_pos), RP_ERR_ARG,
              "lr must be a finite number, got nan");
    CHECK_MSG(rp_error(RP_ERR_ARG, "bad (%g) x=%g, %g", nan_neg, nan_neg, nan_neg), RP_ERR_ARG,
              "bad (nan) x=nan, nan");
    CHECK_MSG(rp_error(RP_ERR_ARG, "%g", nan_neg), RP_ERR_ARG, "nan");
    /* inside a word: left alone */
    CHECK_MSG(rp_error(RP_ERR_IO, "/tmp/a-nan.txt and /tmp/b-nano: %s", "x-nan"), RP_ERR_IO,
              "/tmp/a-nan.txt and /tmp/b-nano: x-nan");
    CHECK_MSG(rp_error(RP_ERR_IO, "a -nanx b -nan_c"), RP_ERR_IO, "a -nanx b -nan_c");
    /* where no number stands: a path's "-nan" before ':' or inside a word */
    CHECK_MSG(rp_error(RP_ERR_IO, "%s: No such file or directory", "/tmp/x -nan"), RP_ERR_IO,
              "/tmp/x -nan: No such file or directory");
    /* a negative number and an infinity keep their signs */
    CHECK_MSG(rp_error(RP_ERR_ARG, "got %g and %g", -1.5, -(double)INFINITY), RP_ERR_ARG,
              "got -1.5 and -inf");
}

int main(void)
{
    test_nan_unsigned();
    return check_summary("test_status");
}
