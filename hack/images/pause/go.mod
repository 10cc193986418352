module mydb/pause

go 1.26.0
