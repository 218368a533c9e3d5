# Functional suites: one property group per file, public API only.
sb_add_test(test_divergence test_divergence.c testutil.c)
sb_add_test(test_isolation test_isolation.c testutil.c)
sb_add_test(test_zerocopy test_zerocopy.c testutil.c)
sb_add_test(test_points test_points.c testutil.c)
sb_add_test(test_pins test_pins.c testutil.c)
