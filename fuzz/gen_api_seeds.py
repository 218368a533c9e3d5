#!/usr/bin/env python3
"""gen_api_seeds.py -- write fuzz/corpus/api/seed-*: inputs for fuzz_api.c.

fuzz_api's input is the model's stream of draws (tests/apimodel.h): the
first byte picks the mode (mod 3), the rest the world and the operations.
Each seed is that byte and 3 KiB from a seeded generator, ten per mode, so
the corpus starts from runs of a couple of hundred operations in every
mode. Standard library only; the output is the same on every run.

    python3 fuzz/gen_api_seeds.py [DIR]   (default: fuzz/corpus/api)
"""
import os
import random
import sys

MODES = ("ram", "exact", "loose")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "corpus", "api")
    os.makedirs(out, exist_ok=True)
    for mode, name in enumerate(MODES):
        for k in range(10):
            rng = random.Random(1000 * mode + k)
            body = bytes(rng.randrange(256) for _ in range(3072))
            with open(os.path.join(out, "seed-%s-%02d" % (name, k)), "wb") as f:
                f.write(bytes([mode]) + body)


if __name__ == "__main__":
    main()
