# shellcheck shell=bash
# Sourced (not executed) by the mysql image's entrypoint on the first start of an empty data directory.
# MYSQL_DATABASE (rmqguard) and MYSQL_USER/MYSQL_PASSWORD are created by the entrypoint itself; this adds the
# test database and grants the same user everything on every database: the tests create and drop tables and
# scratch databases (rmqguard_scratch_*), and a developer creates databases of their own (as with
# deploy/local/up.sh, whose server is a developer's too). No global privilege (SUPER, user management).
# A shell script rather than a plain .sql file so that the user name follows MYSQL_USER (RMQGUARD_DB_USER).
docker_process_sql <<SQL
CREATE DATABASE IF NOT EXISTS \`rmqguard_test\` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci;
GRANT ALL PRIVILEGES ON \`%\`.* TO '${MYSQL_USER}'@'%';
FLUSH PRIVILEGES;
SQL
