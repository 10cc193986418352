"""What the operator applies for a database: Helm values, the credentials Secret, backup Jobs. Pure builders."""
