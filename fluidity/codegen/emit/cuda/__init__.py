"""The cuda target's emitters, one module per op family (each registers its own)."""




