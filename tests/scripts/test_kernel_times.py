#!/usr/bin/env python3
"""bench/kernel_times.py's reading of Nsight Compute's CSV and its grouping, without a GPU: ncu's
own lines before the header are passed over, values carry thousands separators and a unit, other
metrics' rows are not times, and kernel names fold into families."""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import kernel_times  # noqa: E402

HEADER = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream",'
          '"Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit",'
          '"Metric Value"')


def line(i, name, metric, unit, value):
    return ('"%d","1","tcinfer","127.0.0.1","%s","1","30","(256, 1, 1)","(1, 1, 1)","0","9.0",'
            '"Command line profiler metrics","%s","%s","%s"' % (i, name, metric, unit, value))


class KernelTimesTest(unittest.TestCase):
    def test_parse_and_group(self):
        text = "\n".join([
            "==WARNING== Note: Running with uncontrolled GPU caches.",
            "==PROF== Connected to process 609 (/tmp/tcinfer)",
            HEADER,
            line(0, "void <unnamed>::attention_fa2_kernel<__half, 64>(<unnamed>::Fa2Params)",
                 "gpu__time_duration.sum", "ns", "79,550"),
            line(1, "nvjet_sm90_hsh_128x128_64x6_1x2_h_bz_bias_NNT", "gpu__time_duration.sum",
                 "us", "64.77"),
            line(2, "void (anonymous namespace)::attention_fa2_kernel<__half, 64>(Fa2Params)",
                 "gpu__time_duration.sum", "ns", "80,450"),
            line(3, "void <unnamed>::copy_rows_kernel<uint4>(T1 *, const T1 *, RowsDesc)",
                 "sm__cycles_elapsed.avg", "cycle", "1,000"),  # not a time
            line(4, "void <unnamed>::layernorm_cached_kernel<__half, 8, 0, 4>(const T1 *)",
                 "gpu__time_duration.sum", "ms", "0.02"),
        ])
        ks = kernel_times.parse_ncu_csv(text)
        self.assertEqual([n for n, _ in ks], ["attention_fa2_kernel",
                                              "nvjet_sm90_hsh_128x128_64x6_1x2_h_bz_bias_NNT",
                                              "attention_fa2_kernel", "layernorm_cached_kernel"])
        self.assertAlmostEqual(ks[0][1], 79.55)
        self.assertAlmostEqual(ks[1][1], 64.77)
        self.assertAlmostEqual(ks[3][1], 20.0)
        g = kernel_times.group(ks)
        self.assertEqual(g[0][0], "attention_fa2_kernel")
        self.assertEqual(g[0][1], 2)
        self.assertAlmostEqual(g[0][2], 160.0)
        self.assertEqual([r[0] for r in g[1:]], ["nvjet_sm90_hsh_128x128_64x6_1x2_h_bz_bias_NNT",
                                                 "layernorm_cached_kernel"])
        t = kernel_times.table("x", ks, 2)
        self.assertIn("244.8 us of kernel time in 4 kernels", t)
        self.assertEqual(len(t.splitlines()), 4)  # title, header, the top 2

    def test_short_names(self):
        self.assertEqual(kernel_times.short_name("void at::native::vectorized_elementwise_kernel"
                                                 "<4, at::native::GeluCUDAKernelImpl>(int, T1)"),
                         "at::native::vectorized_elementwise_kernel")
        self.assertEqual(kernel_times.short_name("Memset (Device)"), "Memset")
        self.assertEqual(kernel_times.parse_ncu_csv("no header here\n"), [])


if __name__ == "__main__":
    unittest.main(verbosity=2)
