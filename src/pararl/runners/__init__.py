"""Training loops: each reads like the algorithm's pseudocode; bookkeeping lives in
`session.TrainSession`."""
