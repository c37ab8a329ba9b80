package web

// AccountForm is the account page's state: the signed-in user changes their own
// password (POST /account with currentPassword, newPassword and confirmPassword).
// Passwords are never echoed back into the form.
type AccountForm struct {
	Email  string
	Errors FieldErrors
}
