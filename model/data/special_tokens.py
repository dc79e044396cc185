"""The special tokens every tokenizer and model here shares, and their ids (the first five of every
vocabulary). Plain Python: the API reads them through model/nn/config.py without torch or tokenizers."""

SPECIAL_TOKENS = ("<pad>", "<s>", "</s>", "<unk>", "<mask>")
PAD_ID, BOS_ID, EOS_ID, UNK_ID, MASK_ID = range(len(SPECIAL_TOKENS))
