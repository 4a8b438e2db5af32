"""Greedy evaluation of a training run: in the training process (`greedy`), or in
a child process started early and overlapped with training (`child`, `serve`,
`background`)."""
