# Shared modules of tools/train_*.py: plain-torch models (Qwen3, DFlash, ModernBERT + Laya head), the synthetic
# ticket task, the compat layout, the reference speculative loop. No transformers or tokenizers in here.
