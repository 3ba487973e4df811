/* assert_close(x, want, tol): |x - want| <= tol, printing both values on
 * failure (cmocka 1.1.5 has no floating-point assertion). NANs never compare
 * close; test them with isnan. Include after <cmocka.h>. */
#ifndef AORTA_TESTS_ASSERT_CLOSE_H
#define AORTA_TESTS_ASSERT_CLOSE_H

#include <math.h>

#define assert_close(x, want, tol)                                                                 \
    do {                                                                                           \
        double x_ = (x), want_ = (want), tol_ = (tol);                                             \
        if (!(fabs(x_ - want_) <= tol_)) {                                                         \
            print_error("%s = %.17g, want %.17g (tolerance %g)\n", #x, x_, want_, tol_);           \
            _fail(__FILE__, __LINE__);                                                             \
        }                                                                                          \
    } while (0)

#endif
