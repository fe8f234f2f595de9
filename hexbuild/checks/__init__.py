"""`hexbuild test`: is the NPU right? ops (test-backend-ops per HTP session against the CPU) and
ppl (llama-perplexity on HTP against the CPU, gated); report writes JSON, JUnit XML, markdown."""
