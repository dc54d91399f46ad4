Bej
locationx.binp