"""A Flower app: federated tuning of one RBF SVM per landmine field with Fed-PNE (fedpne-jax)."""
