"""hexbuild's virtual NPU: what the ``qemu+npu:`` target needs beside the qemu: board (its parts,
made once into the cache; see hexbuild/targets/qemunpu.py and hexbuild/dsp/{vnpu,host}/)."""
