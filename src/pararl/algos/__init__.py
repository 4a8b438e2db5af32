"""Learning algorithms: the loss math, flat and named as in the papers."""
