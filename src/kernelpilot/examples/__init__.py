"""Example kernel files that follow kernelpilot's kernel file contract (vector_add, softmax, layer_norm, matmul)."""
