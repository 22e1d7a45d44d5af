# numpy: import (OpenBLAS threads), linear algebra, random.
import numpy as np

a = np.random.default_rng(0).random((200, 200))
assert np.allclose(a @ np.linalg.inv(a), np.eye(200), atol=1e-6)
print("ok")
