"""Vectors to measure: static word embeddings, ZCA whitening, sentence and contextual word vectors."""
