"""Keep litellm offline and quiet: imported first by ``ctxmw/__init__``.

litellm fetches its model cost map over the network at import unless told otherwise; ctxmw
never wants that (tests, the demo and air-gapped agents must work offline). A user who set the
variable already keeps their choice.
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
