"""What runs ON the nodes. These files import torch; nothing in ddptui imports them."""
