"""python -m ferry: what this package was built with, and whether the interposer is active here."""
import json

import ferry

print(json.dumps(ferry.build_info(), indent=1, sort_keys=True))
print("interposer:", ferry.status())
