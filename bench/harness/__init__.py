"""What the benchmarks and the tests both need to run the service for real: its processes (stack.py), the
PostgreSQL and Redis they use (services.py), rows made outside a job (rows.py), an OPUS-MT folder built locally
(marian.py). The benchmarks import nothing from tests/, so bench/ runs on a host given only bench/ and the product.
"""
